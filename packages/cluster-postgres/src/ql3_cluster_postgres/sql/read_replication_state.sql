-- The replication-safety guard's reading of the node (DESIGN §13), one statement, any role.
-- Timeline: on a primary the current WAL file name starts with it (8 hex digits), exact right
-- after a promotion; in recovery only the last checkpoint's is readable (it may lag).
-- Commits wait for a standby when synchronous_standby_names names one and this session's
-- synchronous_commit waits for it (on, remote_write, remote_apply; not local or off).
-- pg_stat_replication shows every WAL sender's row to any role, but sync_state only to
-- pg_read_all_stats (NULL otherwise): sync_standbys is then NULL, not 0.
SELECT
    pg_is_in_recovery() AS in_recovery,
    (SELECT c.system_identifier FROM pg_control_system() AS c)::text AS system_identifier,
    CASE
        WHEN pg_is_in_recovery()
            THEN (SELECT k.timeline_id FROM pg_control_checkpoint() AS k)
        ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::integer
    END AS timeline,
    host(inet_server_addr()) AS host,
    inet_server_port() AS port,
    (SELECT count(*) FROM pg_stat_replication AS r)::integer AS standbys,
    (
        SELECT CASE WHEN bool_and(r.sync_state IS NULL) THEN NULL ELSE count(*) FILTER (
            WHERE r.sync_state IN ('sync', 'quorum')
        ) END
        FROM pg_stat_replication AS r
    )::integer AS sync_standbys,
    current_setting('synchronous_standby_names') AS synchronous_standby_names,
    current_setting('synchronous_commit') AS synchronous_commit,
    (
        btrim(current_setting('synchronous_standby_names')) <> ''
        AND current_setting('synchronous_commit') IN ('on', 'remote_write', 'remote_apply')
    ) AS commits_wait_for_standby
