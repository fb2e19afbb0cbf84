-- QL3 schema, version 6: the database is the zone authority, as it is the clock authority.
-- A history can only be judged by the zone rules that were in force while it was decided, and no
-- node carries two tzdata versions; so the database keeps the rule data (TZif bytes) of every
-- version it records, the history of the versions that were in force with the instant each one
-- took effect, and replicas, admins and `ql3 verify` compute with those rules, never with their
-- node's. Switching rules (`ql3 zone-rules adopt`) moves the cursors of the schedules whose zone
-- changed in the same transaction and records what the old rules had due and nobody decided as
-- skip records of reason `zone_rules_changed`. Runs as ql3_owner; grants ship with the objects.

-- 1. The rule data of every recorded version ------------------------------------------------------

-- One row per zone name of a version (canonical names and backward links alike, about 600 rows
-- and 350 KB per version). Written once per version (`ql3 migrate` or adopt upload the node's
-- tzdata wheel) and never changed: a version's rules are what its name says.
CREATE TABLE ql3.zone_rule_data (
    version text  NOT NULL,
    zone    text  NOT NULL,
    tzif    bytea NOT NULL,
    CONSTRAINT zone_rule_data_pkey PRIMARY KEY (version, zone),
    CONSTRAINT zone_rule_data_version_shape CHECK (version ~ '^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$'),
    -- The same shape as a schedule's timezone (trigger_schedules_timezone_shape).
    CONSTRAINT zone_rule_data_zone_shape CHECK (
        length(zone) BETWEEN 1 AND 64
        AND zone ~ '^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$'
    ),
    -- A TZif file starts with its magic; tzdata's largest is about 3 KB.
    CONSTRAINT zone_rule_data_tzif CHECK (
        substring(tzif FROM 1 FOR 4) = '\x545a6966'::bytea AND length(tzif) <= 65536
    )
);

-- 2. The versions that were in force, and since when -----------------------------------------------

-- One row per recorded version in the order they took effect (database time). The version in
-- force has superseded_at_ms NULL (at most one row, by the unique index below); adopting another
-- sets it on the current row and inserts the new one, in the statement that switches
-- ql3.zone_rules, with the same clock reading. A version adopted again gets a row again.
CREATE TABLE ql3.zone_rule_versions (
    seq               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version           text   NOT NULL,
    took_effect_at_ms bigint NOT NULL,
    superseded_at_ms  bigint,
    recorded_by       text   NOT NULL,
    CONSTRAINT zone_rule_versions_version_shape
        CHECK (version ~ '^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$'),
    CONSTRAINT zone_rule_versions_span
        CHECK (superseded_at_ms IS NULL OR superseded_at_ms >= took_effect_at_ms),
    CONSTRAINT zone_rule_versions_recorded_by_length CHECK (length(recorded_by) BETWEEN 1 AND 128)
);

CREATE UNIQUE INDEX zone_rule_versions_current ON ql3.zone_rule_versions ((superseded_at_ms IS NULL))
    WHERE superseded_at_ms IS NULL;

-- The version recorded before this schema is the first one the history knows, in force since it
-- was recorded. Earlier switches were not kept; their rule data is not known.
INSERT INTO ql3.zone_rule_versions (version, took_effect_at_ms, recorded_by)
SELECT z.version, z.recorded_at_ms, z.recorded_by
FROM ql3.zone_rules AS z;

-- 3. Skip records with a reason ----------------------------------------------------------------

-- `misfire` (every record so far): a commit passed occurrences its misfire policy did not admit;
-- it has a claim and a policy. `zone_rules_changed`: adopting other zone rules passed occurrences
-- that the old rules had due and no replica had decided; it names both versions and has no
-- claim. A new reason adds itself to skipped_occurrences_reason and brings its own CHECK. The
-- default is the meaning every record had before this schema and still has when the commit
-- writes one (the commit statement leaves the column to it); an adopt names its reason.
ALTER TABLE ql3.skipped_occurrences
    ADD COLUMN reason text NOT NULL DEFAULT 'misfire',
    ADD COLUMN zone_rules_from text,
    ADD COLUMN zone_rules_to text,
    ALTER COLUMN misfire_policy DROP NOT NULL,
    ALTER COLUMN claim_acquired_at_ms DROP NOT NULL,
    ALTER COLUMN owner_id DROP NOT NULL,
    ALTER COLUMN claim_token DROP NOT NULL,
    ADD CONSTRAINT skipped_occurrences_reason CHECK (reason IN ('misfire', 'zone_rules_changed')),
    ADD CONSTRAINT skipped_occurrences_misfire CHECK (
        reason <> 'misfire'
        OR (misfire_policy IS NOT NULL AND claim_acquired_at_ms IS NOT NULL
            AND owner_id IS NOT NULL AND claim_token IS NOT NULL)
    ),
    ADD CONSTRAINT skipped_occurrences_zone_rules_named CHECK (
        (reason = 'zone_rules_changed') = (zone_rules_from IS NOT NULL AND zone_rules_to IS NOT NULL)
    ),
    -- Passed by the switch itself: no claim and no policy decided them, and each had fallen due
    -- by the time the switch wrote the record.
    ADD CONSTRAINT skipped_occurrences_zone_rules_changed CHECK (
        reason <> 'zone_rules_changed'
        OR (zone_rules_from <> zone_rules_to AND misfire_policy IS NULL
            AND claim_acquired_at_ms IS NULL AND owner_id IS NULL AND claim_token IS NULL
            AND last_skipped_ms <= created_at_ms)
    );

-- 4. Revisions know their zone rules -------------------------------------------------------------

-- The zone rules version a revision's occurrences are computed with: the one in force when it was
-- opened. Adopting rules whose bytes differ for a schedule's zone ends its live revision and opens
-- one of reason `zone_rules` (its cursor placed under the new rules), so a revision's occurrences
-- never straddle two sets of rules for its zone. Revisions older than this schema get the version
-- recorded now, the only one whose rule data can be known.
ALTER TABLE ql3.schedule_revisions
    ADD COLUMN zone_rules_version text,
    DROP CONSTRAINT schedule_revisions_reason,
    ADD CONSTRAINT schedule_revisions_reason
        CHECK (reason IN ('created', 'replaced', 'redefined', 'migrated', 'zone_rules')),
    DROP CONSTRAINT schedule_revisions_placed,
    ADD CONSTRAINT schedule_revisions_placed CHECK (
        reason NOT IN ('created', 'replaced', 'zone_rules') OR placed_after_ms IS NOT NULL
    );

UPDATE ql3.schedule_revisions
SET zone_rules_version = (SELECT z.version FROM ql3.zone_rules AS z);

-- 5. Grants -----------------------------------------------------------------------------------------

-- Replicas load the recorded version's zones; the admin reads them (placement, preview, verify)
-- and writes a version's data and history when it adopts one. Nobody but the owner changes data.
GRANT SELECT ON ql3.zone_rule_data, ql3.zone_rule_versions TO ql3_runtime, ql3_admin;
GRANT INSERT ON ql3.zone_rule_data TO ql3_admin;
GRANT INSERT (version, took_effect_at_ms, recorded_by), UPDATE (superseded_at_ms)
    ON ql3.zone_rule_versions TO ql3_admin;

-- A commit holds the recorded version's row FOR KEY SHARE, so that an adopt (which holds it FOR
-- UPDATE) and a commit are ordered. PostgreSQL asks UPDATE privilege on some column of a row
-- locked that way; `singleton` is the one column whose only allowed value it already holds.
GRANT UPDATE (singleton) ON ql3.zone_rules TO ql3_runtime;

-- The runtime writes misfire records only: it may not name zone rules versions. The admin writes
-- zone_rules_changed records only: no claim, no policy.
REVOKE INSERT ON ql3.skipped_occurrences FROM ql3_runtime;
GRANT INSERT (schedule_id, first_skipped_ms, last_skipped_ms, skipped_count, reason,
              misfire_policy, claim_acquired_at_ms, owner_id, claim_token, created_at_ms)
    ON ql3.skipped_occurrences TO ql3_runtime;
GRANT INSERT (schedule_id, first_skipped_ms, last_skipped_ms, skipped_count, reason,
              zone_rules_from, zone_rules_to, created_at_ms)
    ON ql3.skipped_occurrences TO ql3_admin;
