"""`python -m agentswf`: awf, a Ctrl-C while its commands import said in a line, as the `awf` script
says it (`agentswf_entry`, which isn't imported here: `-m` puts the current directory first on
sys.path, and a file of that name there would stand in for it)."""

import sys

try:
    from .cli.main import main

    code = main()
except KeyboardInterrupt:
    print("awf: interrupted", file=sys.stderr)
    code = 130  # as awf run exits on Ctrl-C
raise SystemExit(code)
