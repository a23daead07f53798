from lonca.cli import main

raise SystemExit(main())
