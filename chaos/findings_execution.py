"""The findings of the review "exact after admission" for docs/EVIDENCE.md (data only).

Zone rules, workers and the other write paths: each finding with its fix and the tests that
fail without it. The renderer is chaos/evidence.py; the rest of the document's text is in
chaos/findings.py.
"""

from __future__ import annotations

# The findings of the review "exact after admission" (each reproduced against real PostgreSQL),
# by part, and where each fix is proven now: (finding and its fix, tests that fail without it).
ZONE_FINDINGS: tuple[tuple[str, str], ...] = (
    (
        (
            "`ql3 zone-rules adopt` recorded the new version but left every cursor where the old"
            " rules had put it: in a zone whose offsets changed, occurrences fired at neither"
            " instant and no skip record said so. Adopt now moves, in its own transaction, the"
            " cursor of every schedule whose zone's rules differ, and records what the old rules"
            " had due and nobody decided as one `zone_rules_changed` skip record naming both"
            " versions."
        ),
        (
            "`test_zone_adopt.py::test_adopt_moves_only_the_cursors_of_changed_zones`,"
            " `::test_adopt_skips_what_the_old_rules_had_due_and_verify_judges_both_spans`; chaos"
            " `zone-switch`; mutant `adopt-keeps-old-cursors`"
        ),
    ),
    (
        (
            "Adopt was not atomic with a claim in flight (the claim reads `ql3.zone_rules` without"
            " a lock): a Run was committed under the superseded rules after adopt returned. The"
            " commit now names the version its decisions were made with and holds the recorded row"
            " `FOR KEY SHARE` (adopt holds it `FOR UPDATE`): such a commit writes nothing (raced)."
        ),
        (
            "`test_zone_adopt.py::test_a_claim_read_under_the_old_rules_cannot_commit_after_adopt`"
            " (the reviewer's interleaving); mutant `commit-ignores-zone-rules-version`"
        ),
    ),
    (
        (
            "`ql3 schedule add` placed a new cursor with the admin node's tzdata, not the recorded"
            " version (a schedule was placed an hour off). Admin placement (add, apply, resume),"
            " `schedule preview` and the Coordinator now compute with the recorded rules loaded"
            " from the database, or refuse in one line naming both versions."
        ),
        (
            "`test_zone_rules.py::test_admin_places_cursors_with_the_recorded_rules`,"
            " `::test_paths_that_need_the_recorded_rules_refuse_without_their_data`,"
            " `::test_a_replica_follows_an_adopt_at_once`; chaos `doctored-zone-files`"
        ),
    ),
    (
        (
            "`ql3 verify` judged the whole history with the verifying node's tzdata, so after any"
            " adopt it reported runs decided under the old rules as not occurrences, or the new"
            " ones as missing. The database now keeps every recorded version's rule data and the"
            " history of versions; verify judges each revision with the rules it names and checks"
            " `zone_rules_changed` records against the old rules and the history."
        ),
        (
            "`test_zone_adopt.py"
            "::test_adopt_skips_what_the_old_rules_had_due_and_verify_judges_both_spans`,"
            " `::test_verify_checks_zone_rules_changed_records`; mutant"
            " `verify-judges-with-the-node-rules`"
        ),
    ),
)

WORKER_FINDINGS: tuple[tuple[str, str], ...] = (
    (
        (
            "A worker that lost its database connection while a command ran fenced itself only"
            " when its lease expired, and the successor could start at that very instant: one"
            " Run's command ran twice at once for ~1.9 s. A runner now starts killing an"
            " unconfirmed command 3 s before its lease can end (monotonic, from the send time of"
            " the last cleanly acknowledged renewal), and an abandoned attempt's successor waits"
            " for the old lease's expiry + a 5 s grace (arithmetic in docs/OPERATIONS.md)."
        ),
        (
            "chaos `worker-lost-connection` (the commands' own timestamps);"
            " `test_ingress_clock.py::test_an_abandoned_attempts_successor_waits_out_the_grace`,"
            " `::test_the_successor_grace_covers_the_kill_margin`;"
            " `test_worker_parts.py"
            "::test_the_kill_point_is_the_margin_before_the_lease_counted_from_the_send`"
        ),
    ),
    (
        (
            "A lost reply to a take burned an attempt (with `max_attempts = 1` the Run never ran)."
            " A take whose answer is lost is settled from durable facts before the next one: the"
            " attempts it took unknowingly are handed back without using one up."
        ),
        (
            "`test_ingress_uncertain.py::test_a_take_whose_answer_is_lost_burns_no_attempt`;"
            " `test_worker_faults.py::test_a_lost_take_answer_burns_no_attempt`"
        ),
    ),
    (
        (
            "Worker take, renew and finish ignored the sync-rep cancel WARNING, so a command whose"
            " success was recorded only on the old primary could run again, and a worker could run"
            " an attempt that existed only there. Every worker write goes through"
            " `acknowledged_write` and is settled after the durability barrier."
        ),
        (
            "`test_ingress_uncertain.py"
            "::test_a_take_kept_only_by_the_primary_is_not_run_until_durable`,"
            " `::test_a_finish_kept_only_by_the_primary_is_confirmed_once_durable`"
        ),
    ),
    (
        (
            "A finish whose retry found the attempt already finished logged success as lost. The"
            " worker now logs what the database holds (`attempt.already_recorded`, e.g. recorded"
            " succeeded by this worker)."
        ),
        (
            "`test_ingress_uncertain.py"
            "::test_a_finish_whose_answer_is_lost_is_found_recorded_by_its_worker`;"
            " `test_worker_faults.py::test_a_lost_finish_answer_is_found_recorded_by_this_worker`"
        ),
    ),
    (
        (
            "A worker whose connection went silent (packets dropped, no RST) blocked for ever in"
            " its heartbeat and ignored SIGTERM. Every worker statement has a statement timeout"
            " and a client-side deadline that cuts the socket, and SIGTERM is honoured while a"
            " call hangs."
        ),
        (
            "`test_ingress_uncertain.py::test_a_silent_server_cannot_hold_a_call`;"
            " `test_worker_faults.py"
            "::test_a_silent_database_is_reported_and_the_stop_still_happens`;"
            " `e2e/test_worker.py::test_sigterm_is_honoured_while_the_database_is_silent`"
        ),
    ),
    (
        (
            "A `ql3_worker_ingress` login could insert attempts with any state and time, rewrite"
            " outcomes, move times backwards, finish or take over another worker's attempt and"
            " append any event (9 of 19 forbidden writes refused). Workers now write only through"
            " SECURITY DEFINER functions that bind a lease to the login that took it, enforce the"
            " state machine and take every time from the database clock; direct writes are"
            " revoked."
        ),
        "`roles/test_worker_fences.py` (27 refused, 5 allowed, two worker logins, 0 skips)",
    ),
    (
        (
            "Execution is at least once per Run (a crash between a command's end and its finish"
            " runs it again; `QL3_RUN_ID` is the idempotency key). A transactional Python task's"
            " database writes commit in the transaction that records its success: exactly once,"
            " even under SIGKILL at any point."
        ),
        (
            "chaos `worker-transactional-sigkill` (counter = succeeded Runs);"
            " `test_ingress_transaction.py` (6 tests);"
            " `test_worker_faults.py"
            "::test_a_transactional_task_writes_exactly_once_with_its_success`"
        ),
    ),
)

WRITE_PATH_FINDINGS: tuple[tuple[str, str], ...] = (
    (
        (
            "Admin edits ignored the sync-rep cancel WARNING. An admin change whose COMMIT reply is"
            " lost or carries it is settled on a fresh connection after the durability barrier (an"
            " add is found by name and definition; any other change is reconciled again); until a"
            " standby confirms, the call fails as uncertain."
        ),
        (
            "`test_admin_sync_commit.py"
            "::test_an_add_acknowledged_with_the_warning_is_not_reported_done`,"
            " `::test_an_uncertain_add_settles_as_the_durable_schedule_once`"
        ),
    ),
    (
        (
            "When the quarantine statement itself failed, the good claims of the same batch stayed"
            " claimed for a whole lease. The claim round hands over its readable claims anyway,"
            " and the Coordinator commits a round before quarantining its undecidable claims"
            " (released next cycle if that fails)."
        ),
        (
            "`test_quarantine.py::test_a_failed_quarantine_still_hands_over_the_readable_claims`;"
            " `test_coordinator_quarantine_pg.py"
            "::test_a_failed_quarantine_does_not_hold_back_the_rounds_admissions`"
        ),
    ),
    (
        (
            "A payload above the kernel's environment limit failed every attempt with E2BIG. It is"
            " refused when written (at most 64 KiB of compact JSON, naming the field)."
        ),
        (
            "`test_input_bounds.py"
            "::test_a_payload_every_command_can_receive_is_stored_and_a_larger_one_refused`"
        ),
    ),
    (
        (
            "The README's `CREATE ROLE ... PASSWORD 'secret'` put a plaintext password into server"
            " logs and shell history. `ql3 roles login` reads it from a prompt or stdin and, like"
            " `create_login_user`, sends only the SCRAM-SHA-256 verifier."
        ),
        (
            "`roles/test_provisioning.py::test_a_login_password_never_reaches_the_server_in_clear`;"
            " `e2e/test_cli.py::test_roles_login_sends_only_a_verifier`"
        ),
    ),
)
