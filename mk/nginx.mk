# nginx.mk - Debian's nginx and its Lua module, unpacked for tests/integration/test_nginx.py
# (scripts/fetch-nginx.sh; the script skips what is already there).

NGINX_STAMP := $(B)/stock/nginx/.nupp-extracted

$(NGINX_STAMP): scripts/fetch-nginx.sh
	$(Q)B=$(B) scripts/fetch-nginx.sh

.PHONY: nginx
nginx: $(NGINX_STAMP)
test: nginx
