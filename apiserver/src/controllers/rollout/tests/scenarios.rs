//! Scenarios beyond sdk-go's table: the worked example of ocm-wave2.md §1.4, the `maxFailures`
//! deviation, mandatory groups by index, time outs holding a rollout, skipped statuses, errors.

use super::*;

/// ocm-wave2.md §1.4: Progressive over c0..c9 in one group, window 3, maxFailures 1, soak 5m,
/// deadline 10m, followed round by round.
#[test]
fn worked_example_of_the_reference() {
    let strategy = spec().window(int(3)).fails(int(1)).soak("5m").deadline("10m").progressive();
    let names: Vec<String> = (0..10).map(|i| format!("c{i}")).collect();
    let groups = Groups::new([(GroupKey::new("", 0), names)]);
    let g = ("", 0);

    let first = plan(&strategy, &groups, &[], now()).unwrap();
    assert_eq!(first.to_rollout, [new("c0", g), new("c1", g), new("c2", g)]);
    assert_eq!(first.recheck_after, None);

    // c0 succeeded 2 min ago (soaking), c1 progressing, c2 failed: the window is full.
    let round2 = [
        has("c0", g, Succeeded, Some(-120)),
        has("c1", g, Progressing, Some(-180)),
        has("c2", g, Failed, Some(-60)),
    ];
    let second = plan(&strategy, &groups, &round2, now()).unwrap();
    let held = |s: &ClusterStatus| s.cluster.as_str().to_owned();
    assert_eq!(second.to_rollout.iter().map(held).collect::<Vec<_>>(), ["c0", "c1", "c2"]);
    assert!(!second.max_failure_breach);
    assert_eq!(second.recheck_after, Some(Duration::from_secs(180)), "c0's soak ends first");

    // Three minutes on, c0's soak is over: one failure (c2) is tolerated, c3 joins.
    let later = at(180);
    let third = plan(&strategy, &groups, &round2, later).unwrap();
    assert_eq!(third.to_rollout.iter().map(held).collect::<Vec<_>>(), ["c1", "c2", "c3"]);
    assert!(!third.max_failure_breach);

    // c1 fails too: two failures breach the tolerance of one, so c4 never starts, and c3's
    // work that is still ToApply is left where it is.
    let round4 = [
        has("c0", g, Succeeded, Some(-120)),
        has("c1", g, Failed, Some(170)),
        has("c2", g, Failed, Some(-60)),
        has("c3", g, ToApply, None),
    ];
    let fourth = plan(&strategy, &groups, &round4, later).unwrap();
    assert_eq!(fourth.to_rollout.iter().map(held).collect::<Vec<_>>(), ["c1", "c2"]);
    assert!(fourth.max_failure_breach);
    assert!(fourth.timed_out.is_empty());
}

/// ocm-wave2.md §7: sdk-go reads a `maxFailures` above the population as 0; here it tolerates
/// every failure, and 0 stays 0.
#[test]
fn max_failures_above_the_population_tolerate_every_failure() {
    let groups = groups(&[("", 0, &["a", "b", "c"]), ("", 1, &["d", "e", "f"])]);
    let g0 = ("", 0);
    let existing =
        [has("a", g0, Failed, None), has("b", g0, Failed, None), has("c", g0, Succeeded, None)];

    // Progressive: 5 over 6 clusters is below the population, 7 is above it. sdk-go would
    // breach with 7 (read as 0) and add nothing; here both add d.
    for max_failures in [5, 7] {
        let strategy = spec().window(int(3)).fails(int(max_failures)).progressive();
        let plan = plan(&strategy, &groups, &existing, now()).unwrap();
        let rolled: Vec<_> = plan.to_rollout.iter().map(|s| s.cluster.as_str()).collect();
        assert_eq!(rolled, ["a", "b", "d"], "maxFailures {max_failures}");
        assert!(!plan.max_failure_breach, "maxFailures {max_failures}");
    }
    for zero in [int(0), int(-2), pct("0%")] {
        let strategy = spec().window(int(3)).fails(zero.clone()).progressive();
        let plan = plan(&strategy, &groups, &existing, now()).unwrap();
        assert!(plan.max_failure_breach, "{zero:?}");
        assert_eq!(plan.to_rollout.len(), 2, "{zero:?}: no new cluster");
    }

    // ProgressivePerGroup: 4 (and 150%) over a group of 3 tolerate both failures of group 0.
    for max_failures in [int(4), pct("150%")] {
        let strategy = spec().fails(max_failures.clone()).per_group();
        let plan = plan(&strategy, &groups, &existing, now()).unwrap();
        let new_ones: Vec<_> = plan
            .to_rollout
            .iter()
            .filter(|s| s.status == ToApply)
            .map(|s| s.cluster.as_str())
            .collect();
        assert_eq!(new_ones, ["d", "e", "f"], "{max_failures:?}");
        assert!(!plan.max_failure_breach, "{max_failures:?}");
    }
    let strict = plan(&spec().fails(int(0)).per_group(), &groups, &existing, now()).unwrap();
    assert!(strict.max_failure_breach);
}

#[test]
fn mandatory_groups_by_index_and_unknown_entries() {
    let groups = pairs();
    // Index 1 is mandatory: c3 and c4 first.
    let by_index = spec().mandatory_index(1).window(int(1)).progressive();
    let first = plan(&by_index, &groups, &[], now()).unwrap();
    assert_eq!(first.to_rollout, [new("cluster3", I1), new("cluster4", I1)]);
    // Unknown names and indexes are ignored: the window runs over everything.
    let unknown = spec().mandatory("nope").mandatory_index(9).window(int(1)).progressive();
    let plan = plan(&unknown, &groups, &[], now()).unwrap();
    assert_eq!(plan.to_rollout, [new("cluster1", G1)]);
}

#[test]
fn a_time_out_anywhere_holds_a_rollout_with_mandatory_groups() {
    // ocm-wave2.md §7: with mandatory groups configured, one timed-out cluster in a later group
    // stops everything.
    let groups = pairs();
    let existing = [
        has("cluster1", G1, Succeeded, Some(-600)),
        has("cluster2", G1, Succeeded, Some(-600)),
        has("cluster3", I1, Progressing, Some(-600)),
    ];
    let with = spec().mandatory("group1").deadline("5m").window(int(4)).progressive();
    let held = plan(&with, &groups, &existing, now()).unwrap();
    assert!(held.to_rollout.is_empty());
    assert_eq!(held.timed_out, [want("cluster3", I1, TimeOut, Some(-600), Some(-300))]);
    let without = spec().deadline("5m").window(int(4)).fails(int(1)).progressive();
    let moving = plan(&without, &groups, &existing, now()).unwrap();
    assert_eq!(moving.to_rollout.len(), 3, "c4, c5, c6 start");
}

#[test]
fn timed_out_and_skipped_statuses_are_left_alone() {
    let groups = groups(&[("", 0, &["a", "b", "c"])]);
    let g = ("", 0);
    let existing = [has("a", g, TimeOut, Some(-10)), has("b", g, Skip, None)];
    let all = plan(&spec().deadline("1m").all(), &groups, &existing, now()).unwrap();
    assert_eq!(all.to_rollout, [new("c", g)]);
    assert!(all.timed_out.is_empty(), "only clusters that time out now are reported");
    // A TimeOut status still counts as a failure.
    let strict = spec().fails(int(0)).window(int(3)).progressive();
    let plan = plan(&strict, &groups, &existing, now()).unwrap();
    assert!(plan.max_failure_breach);
    assert!(plan.to_rollout.is_empty());
}

#[test]
fn strategy_errors_are_typed() {
    let groups = pairs();
    let fail = |s: RolloutStrategy| plan(&s, &groups, &[], now()).unwrap_err();
    let unknown = RolloutStrategy { type_: Some("Sometimes".into()), ..Default::default() };
    assert_eq!(fail(unknown), RolloutError::UnknownType("Sometimes".into()));
    assert_eq!(fail(RolloutStrategy::default()), RolloutError::UnknownType(String::new()));
    for bad in ["2d", "0", "2d0s", "10g"] {
        assert_eq!(fail(spec().deadline(bad).all()), RolloutError::DeadlineFormat(bad.into()));
    }
    assert_eq!(fail(spec().deadline("2d").all()).to_string(), "invalid timeout format");
    assert!(matches!(fail(spec().deadline("1hx").per_group()), RolloutError::Deadline(_)));
    assert!(matches!(fail(spec().soak("soon").progressive()), RolloutError::MinSuccessTime(_)));
    let bad_failures = fail(spec().fails(pct("many")).progressive());
    assert_eq!(
        bad_failures.to_string(),
        "failed to parse the provided maxFailures: 'many' is an invalid maximum threshold value: \
         string is not a percentage"
    );
    assert!(matches!(fail(spec().fails(pct("x%")).per_group()), RolloutError::MaxFailures(_)));
    assert!(matches!(fail(spec().window(pct("3")).progressive()), RolloutError::MaxConcurrency(_)));
    // `All` reads neither maxFailures nor minSuccessTime.
    let lenient = spec().fails(pct("many")).soak("soon").all();
    assert_eq!(plan(&lenient, &groups, &[], now()).unwrap().to_rollout.len(), 6);
}

#[test]
fn a_bad_window_is_not_read_while_mandatory_groups_roll() {
    // As sdk-go: maxConcurrency is parsed only once the mandatory groups are done.
    let groups = pairs();
    let strategy = spec().mandatory("group1").window(pct("3")).progressive();
    let plan = plan(&strategy, &groups, &[], now()).unwrap();
    assert_eq!(plan.to_rollout, [new("cluster1", G1), new("cluster2", G1)]);
}

#[test]
fn soaking_counts_from_now_without_a_transition_time() {
    let groups = groups(&[("", 0, &["a", "b"])]);
    let g = ("", 0);
    let existing = [has("a", g, Succeeded, None), has("b", g, Progressing, None)];
    let strategy = spec().soak("2m").deadline("5m").window(int(2)).progressive();
    let plan = plan(&strategy, &groups, &existing, now()).unwrap();
    assert_eq!(
        plan.to_rollout,
        [want("a", g, Succeeded, None, Some(120)), want("b", g, Progressing, None, Some(300))]
    );
    assert_eq!(plan.recheck_after, Some(Duration::from_secs(120)));
}
