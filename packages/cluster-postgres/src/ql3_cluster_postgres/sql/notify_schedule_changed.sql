-- Wake idle Coordinators (delivered at COMMIT, dropped on rollback).
SELECT pg_notify('ql3_schedule_changed', %(reason)s)
