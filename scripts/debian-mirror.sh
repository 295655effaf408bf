# debian-mirror.sh - sourced by the scripts that fetch from Debian: mirror()
# prints the Debian mirror of the machine's apt sources (deb822 or one-line
# form), or nothing when there is none.
mirror() {
    for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        awk '/^URIs:/ { print $2; exit } /^deb / { print ($2 ~ /^\[/ ? $3 : $2); exit }' "$f"
    done | grep -E '/debian/?$' | head -n 1
}
