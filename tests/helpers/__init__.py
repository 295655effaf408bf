# SPDX-License-Identifier: MIT
"""What the tests share besides fixtures (those are in tests/conftest.py):
paths, LuaJIT builds, running nupp-bpf and reading its files, target
processes. Tests import from here, never from conftest.py."""
from .paths import *		# noqa: F401,F403
from .builds import *		# noqa: F401,F403
from .builds import _pinned_libdir	# noqa: F401
from .nupp import *		# noqa: F401,F403
from .perf import *		# noqa: F401,F403
from .procs import *		# noqa: F401,F403
from .variants import *		# noqa: F401,F403
