"""The admin room: `ScheduleAdmin` (role `ql3_admin`), what it takes and returns, and its plans.

Owns the transactions that create, reconcile, pause, resume and retire schedules (DESIGN §7,
§11), the pydantic models of their arguments and reports, and the pure planning that decides
what a change writes.

May import: the package's base modules (`_sql`, `_connect`, `_durability`, `_retry`, ...) and the
`zones` room (the recorded zone rules every placement computes with). Never `repository`,
`ingress`, `verify` or `server`: an admin change reaches the other roles only through the rows
it writes and the `ql3_schedule_changed` notification.
"""
