-- ScheduleAdmin.resume and PostgresScheduleRepository.resume_expired_pauses: ql3.resume_pause_v1
-- (migration 0010) closes the open span, writes its `paused` skip record and sets the cursor, after
-- re-checking every argument against the locked row and the database clock; false: a racing
-- resume won, nothing was written.
SELECT ql3.resume_pause_v1(
    %(schedule_id)s::bigint, %(cursor_seen)s::bigint, %(end_ms)s::bigint, %(first_ms)s::bigint,
    %(last_ms)s::bigint, %(count)s::bigint, %(next_cursor_ms)s::bigint, %(state)s::text,
    %(replay)s::text, %(automatic)s::boolean, %(zone_rules_version)s::text
) AS resumed
