"""`python -m consumer_service`: run the service until SIGTERM or SIGINT."""

from __future__ import annotations

from .service import main

raise SystemExit(main())
