-- ScheduleAdmin: the database time a change places cursors after. Read AFTER the rows it changes
-- are locked (DESIGN §7: read before the lock, a replica committing in between could admit an
-- occurrence at or after the cursor placed from the older time). The value is also kept as the
-- transaction-local setting ql3.placed_after_ms, so open_revisions.sql records exactly the instant
-- each new cursor was computed from without the time travelling back as a parameter.
SELECT set_config(
    'ql3.placed_after_ms',
    floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint::text,
    true
)::bigint AS now_ms
