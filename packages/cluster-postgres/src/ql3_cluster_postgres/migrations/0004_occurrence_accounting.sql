-- QL3 schema, version 4: every occurrence accounted for (DESIGN §7). A commit that moves a cursor
-- past occurrences without admitting them records which ones (skipped_occurrences); every admin
-- change that places a cursor or changes a definition opens a revision (schedule_revisions), so
-- `ql3 verify` knows from which cursor each definition's occurrences must be accounted for.
-- Grants ship with the tables, as in 0002. Times are database milliseconds (rule zero).

-- One row per fenced commit whose decision passed at least one occurrence without admitting it
-- (misfire policies fire_once and skip): the contiguous range [first_skipped_ms, last_skipped_ms]
-- of that schedule's occurrences, `skipped_count` of them, never one row per occurrence (a week
-- of an every-second schedule is one row). Written by the same statement that moves the cursor,
-- fenced by the same exact claim; created_at_ms is that statement's clock sample.
-- Like runs: no FOREIGN KEY and only inserted into by the commit, so replicas committing
-- different schedules share no SSI predicate lock here (see 0001).
CREATE TABLE ql3.skipped_occurrences (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_id          bigint NOT NULL,
    first_skipped_ms     bigint NOT NULL,
    last_skipped_ms      bigint NOT NULL,
    skipped_count        bigint NOT NULL,
    misfire_policy       text   NOT NULL,
    claim_acquired_at_ms bigint NOT NULL,
    owner_id             text   NOT NULL,
    claim_token          uuid   NOT NULL,
    -- How late the claim came for the newest and the oldest skipped occurrence.
    lateness_newest_ms   bigint GENERATED ALWAYS AS (claim_acquired_at_ms - last_skipped_ms) STORED,
    lateness_oldest_ms   bigint GENERATED ALWAYS AS (claim_acquired_at_ms - first_skipped_ms) STORED,
    created_at_ms        bigint NOT NULL,
    -- catch_up admits every occurrence: it never skips.
    CONSTRAINT skipped_occurrences_policy CHECK (misfire_policy IN ('fire_once', 'skip')),
    CONSTRAINT skipped_occurrences_range CHECK (first_skipped_ms <= last_skipped_ms),
    CONSTRAINT skipped_occurrences_count CHECK (
        skipped_count >= 1 AND (skipped_count = 1) = (first_skipped_ms = last_skipped_ms)
    ),
    -- Only missed occurrences are skipped: each was due before the claim that passed it.
    CONSTRAINT skipped_occurrences_missed CHECK (last_skipped_ms < claim_acquired_at_ms),
    CONSTRAINT skipped_occurrences_commit_time CHECK (created_at_ms >= claim_acquired_at_ms)
);

CREATE INDEX skipped_occurrences_schedule ON ql3.skipped_occurrences (schedule_id, first_skipped_ms);

-- One row per definition a schedule has had, written by the admin in the statement that creates
-- or changes the schedule row. `first_cursor_ms` is the first cursor of this revision (NULL when
-- it started exhausted); `end_cursor_ms` the cursor at which it ended (NULL while it is the live
-- revision, or when it ended exhausted). Every occurrence of the definition from the first cursor
-- up to the end cursor (the schedule's cursor for the live revision) is a run or skipped.
-- reason: 'created' (first revision), 'replaced' (the cursor was placed anew: cron, timezone or
-- start changed, or a retired/exhausted schedule came back), 'redefined' (policy, grace or end
-- changed, the cursor kept), 'migrated' (backfilled below for schedules older than this file).
-- `placed_after_ms` is the database time the admin placed a 'created'/'replaced' cursor after:
-- the first cursor is the first occurrence strictly after max(placed_after_ms, start_at_ms - 1,
-- the latest occurrence already admitted or skipped), which `ql3 verify` checks exactly.
CREATE TABLE ql3.schedule_revisions (
    schedule_id      bigint  NOT NULL,
    revision         integer NOT NULL,
    reason           text    NOT NULL,
    cron             text    NOT NULL,
    timezone         text    NOT NULL,
    misfire_policy   text    NOT NULL,
    misfire_grace_ms bigint  NOT NULL,
    start_at_ms      bigint,
    end_at_ms        bigint,
    first_cursor_ms  bigint,
    end_cursor_ms    bigint,
    placed_after_ms  bigint,
    created_at_ms    bigint  NOT NULL,
    ended_at_ms      bigint,
    CONSTRAINT schedule_revisions_pkey PRIMARY KEY (schedule_id, revision),
    CONSTRAINT schedule_revisions_number CHECK (revision >= 1),
    CONSTRAINT schedule_revisions_reason
        CHECK (reason IN ('created', 'replaced', 'redefined', 'migrated')),
    CONSTRAINT schedule_revisions_placed
        CHECK (reason NOT IN ('created', 'replaced') OR placed_after_ms IS NOT NULL),
    CONSTRAINT schedule_revisions_placed_before
        CHECK (placed_after_ms IS NULL OR placed_after_ms <= created_at_ms),
    CONSTRAINT schedule_revisions_misfire_policy
        CHECK (misfire_policy IN ('fire_once', 'skip', 'catch_up')),
    CONSTRAINT schedule_revisions_grace CHECK (misfire_grace_ms >= 0),
    CONSTRAINT schedule_revisions_window
        CHECK (start_at_ms IS NULL OR end_at_ms IS NULL OR end_at_ms >= start_at_ms),
    CONSTRAINT schedule_revisions_ended CHECK (ended_at_ms IS NOT NULL OR end_cursor_ms IS NULL),
    CONSTRAINT schedule_revisions_times
        CHECK (ended_at_ms IS NULL OR ended_at_ms >= created_at_ms)
);

-- At most one live revision per schedule.
CREATE UNIQUE INDEX schedule_revisions_live ON ql3.schedule_revisions (schedule_id)
    WHERE ended_at_ms IS NULL;

-- Schedules older than this migration: their first cursor is unknown (no revision recorded it),
-- so their current cursor stands in for it; occurrences before it are not accounted for, and
-- `ql3 verify` judges runs before it only by the older rules. Quarantined rows (state `invalid`,
-- schema 3) get one too, with the definition as stored even if no replica can read it: verify
-- does not judge a quarantined schedule, and bringing it back ends this revision at the kept
-- cursor, so an unreadable one never covers an occurrence. Every column copied here is held by a
-- trigger_schedules CHECK at least as strict as this table's, so no existing row can fail it.
INSERT INTO ql3.schedule_revisions (
    schedule_id, revision, reason, cron, timezone, misfire_policy, misfire_grace_ms, start_at_ms,
    end_at_ms, first_cursor_ms, created_at_ms
)
SELECT s.id, 1, 'migrated', s.cron, s.timezone, s.misfire_policy, s.misfire_grace_ms,
       s.start_at_ms, s.end_at_ms, s.next_due_at_ms,
       floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
FROM ql3.trigger_schedules AS s;

-- ql3_runtime appends skip records in its commit (SELECT for the commit's RETURNING and for
-- settling an uncertain commit, as on runs); ql3_admin reads them (status, verify).
-- Nobody but the owner may UPDATE, DELETE or TRUNCATE them: they are history.
GRANT SELECT ON ql3.skipped_occurrences TO ql3_admin, ql3_runtime;
GRANT INSERT ON ql3.skipped_occurrences TO ql3_runtime;

-- ql3_admin writes revisions with the schedule changes; it may only close a revision and
-- nothing else of it. The runtime and the workers do not need them.
GRANT SELECT, INSERT ON ql3.schedule_revisions TO ql3_admin;
GRANT UPDATE (end_cursor_ms, ended_at_ms) ON ql3.schedule_revisions TO ql3_admin;
