"""The verify room: `verify_history` (`ql3 verify`), which judges a history against DESIGN §7.

Owns the snapshot reads and every rule (shape, order, cursor, revisions, accounting, skip
records, attempts, stall, lateness) and the report. Read-only: nothing here writes.

May import: the package's base modules and the `zones` room (the zone rules each revision was
computed with). Never `admin`, `repository`, `ingress` or `server`: verify judges what they
wrote by reading it, so sharing their code would let a bug agree with itself.
"""
