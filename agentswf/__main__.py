from agentswf_entry import main  # Ctrl-C while awf's commands import: a line, not a traceback

raise SystemExit(main())
