//! sdk-go's `TestGetRolloutCluster_Progressive` cases, with its added- and removed-cluster
//! cases for `Progressive`.

use super::*;

/// sdk-go's statuses of c1–c10 with c1 progressing and the rest waiting (c10 in no decision).
fn mostly_waiting() -> Vec<ClusterStatus> {
    let mut existing = vec![has("cluster1", G1, Progressing, Some(-60))];
    existing.extend(["cluster2", "cluster3"].map(|c| has(c, G1, ToApply, None)));
    existing.extend(["cluster4", "cluster5", "cluster6"].map(|c| has(c, I1, ToApply, None)));
    existing.extend(
        ["cluster7", "cluster8", "cluster9", "cluster10"].map(|c| has(c, I2, ToApply, None)),
    );
    existing
}

#[test]
fn progressive_windows_match_sdk_go() {
    let c1_progressing = want("cluster1", G1, Progressing, Some(-60), Some(30));
    let c10_removed = has("cluster10", I2, ToApply, None);
    let waiting = |cluster: &str, group| has(cluster, group, ToApply, None);
    run(vec![
        Case {
            name: "progressive, 90s, window 2, nothing applied yet",
            strategy: spec().deadline("90s").window(int(2)).progressive(),
            groups: two_groups(),
            existing: vec![],
            expect: expect(
                vec![new("cluster1", G1), new("cluster2", G1)],
                vec![],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "progressive, 90s, window 4, statuses ToApply",
            strategy: spec().deadline("90s").window(int(4)).progressive(),
            groups: three_groups(),
            existing: mostly_waiting(),
            expect: expect(
                vec![
                    c1_progressing.clone(),
                    waiting("cluster2", G1),
                    waiting("cluster3", G1),
                    waiting("cluster4", I1),
                ],
                vec![],
                vec![c10_removed.clone()],
                false,
                Some(30),
            ),
        },
        Case {
            name: "progressive, 90s, maxConcurrency not set",
            strategy: spec().deadline("90s").progressive(),
            groups: three_groups(),
            existing: mostly_waiting(),
            expect: expect(
                vec![
                    c1_progressing,
                    waiting("cluster2", G1),
                    waiting("cluster3", G1),
                    waiting("cluster4", I1),
                    waiting("cluster5", I1),
                    waiting("cluster6", I1),
                    waiting("cluster7", I2),
                    waiting("cluster8", I2),
                    waiting("cluster9", I2),
                ],
                vec![],
                vec![c10_removed],
                false,
                Some(30),
            ),
        },
    ]);
}

#[test]
fn progressive_failures_match_sdk_go() {
    let c2_timed_out = want("cluster2", G1, TimeOut, Some(-120), Some(-30));
    let c3_progressing = want("cluster3", G1, Progressing, Some(-60), Some(30));
    let soaking = vec![
        has("cluster1", G1, Succeeded, Some(-30)),
        has("cluster2", G1, Failed, Some(-120)),
        has("cluster3", G1, Progressing, Some(-30)),
    ];
    let six = groups(&[
        ("group1", 0, &["cluster1", "cluster2"]),
        ("", 1, &["cluster3", "cluster4", "cluster5", "cluster6"]),
    ]);
    let none_statuses = vec![
        has("cluster1", G1, Succeeded, Some(-60)),
        has("cluster2", G1, Failed, Some(-120)),
        has("cluster3", I1, Progressing, Some(-60)),
    ];
    run(vec![
        Case {
            name: "progressive, 90s, no maxFailures",
            strategy: spec().deadline("90s").window(int(2)).progressive(),
            groups: two_groups(),
            existing: done_failed_applying(),
            expect: expect(
                vec![c3_progressing.clone()],
                vec![c2_timed_out.clone()],
                vec![],
                true,
                Some(30),
            ),
        },
        Case {
            name: "progressive, 90s, maxFailures 100%, minSuccessTime 60s",
            strategy: spec()
                .deadline("90s")
                .fails(pct("100%"))
                .soak("1m")
                .window(int(2))
                .progressive(),
            groups: two_groups(),
            existing: soaking,
            expect: expect(
                vec![
                    want("cluster1", G1, Succeeded, Some(-30), Some(30)),
                    want("cluster3", G1, Progressing, Some(-30), Some(60)),
                ],
                vec![c2_timed_out.clone()],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "progressive, mixed deadlines and soaks",
            strategy: spec()
                .deadline("90s")
                .fails(pct("100%"))
                .soak("1m")
                .window(int(4))
                .progressive(),
            groups: groups(&[("group1", 0, &["cluster1", "cluster2", "cluster3", "cluster4"])]),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-30)),
                has("cluster2", G1, Progressing, Some(-60)),
                has("cluster3", G1, Progressing, Some(-30)),
                has("cluster4", G1, Succeeded, Some(-120)),
            ],
            expect: expect(
                vec![
                    want("cluster1", G1, Succeeded, Some(-30), Some(30)),
                    want("cluster2", G1, Progressing, Some(-60), Some(30)),
                    want("cluster3", G1, Progressing, Some(-30), Some(60)),
                ],
                vec![],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "progressive, 90s, maxFailures 1",
            strategy: spec().deadline("90s").fails(int(1)).window(int(2)).progressive(),
            groups: two_groups(),
            existing: done_failed_applying(),
            expect: expect(
                vec![c3_progressing.clone(), new("cluster4", I1)],
                vec![c2_timed_out.clone()],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "progressive, deadline 0s, maxFailures 3",
            strategy: spec().deadline("0s").fails(int(3)).window(int(2)).progressive(),
            groups: two_groups(),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-30)),
                has("cluster2", G1, Progressing, Some(-30)),
                has("cluster3", G1, Progressing, Some(-30)),
            ],
            expect: expect(
                vec![new("cluster4", I1), new("cluster5", I1)],
                vec![
                    want("cluster2", G1, TimeOut, Some(-30), Some(-30)),
                    want("cluster3", G1, TimeOut, Some(-30), Some(-30)),
                ],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "progressive, no deadline, window 50%, maxFailures 100%",
            strategy: spec().deadline("None").fails(pct("100%")).window(pct("50%")).progressive(),
            groups: six.clone(),
            existing: none_statuses.clone(),
            expect: expect(
                vec![
                    want("cluster2", G1, Failed, Some(-120), None),
                    want("cluster3", I1, Progressing, Some(-60), None),
                    new("cluster4", I1),
                ],
                vec![],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "progressive, no deadline, window 50%, maxFailures 0%",
            strategy: spec().deadline("None").fails(pct("0%")).window(pct("50%")).progressive(),
            groups: six,
            existing: none_statuses,
            expect: expect(
                vec![
                    want("cluster2", G1, Failed, Some(-120), None),
                    want("cluster3", I1, Progressing, Some(-60), None),
                ],
                vec![],
                vec![],
                true,
                None,
            ),
        },
        Case {
            name: "progressive, 90s, maxFailures 100%, cluster removed",
            strategy: spec().deadline("90s").fails(pct("100%")).window(int(2)).progressive(),
            groups: groups(&[
                ("group1", 0, &["cluster2", "cluster3"]),
                ("", 1, &["cluster4", "cluster5", "cluster6"]),
            ]),
            existing: done_failed_applying(),
            expect: expect(
                vec![c3_progressing, new("cluster4", I1)],
                vec![c2_timed_out],
                vec![has("cluster1", G1, Succeeded, Some(-60))],
                false,
                Some(30),
            ),
        },
    ]);
}

#[test]
fn progressive_mandatory_groups_match_sdk_go() {
    let c2_timed_out = want("cluster2", G1, TimeOut, Some(-120), Some(-30));
    run(vec![
        Case {
            name: "progressive, mandatory group1, 90s",
            strategy: spec().mandatory("group1").deadline("90s").window(int(3)).progressive(),
            groups: two_groups(),
            existing: done_failed_applying(),
            expect: expect(
                vec![want("cluster3", G1, Progressing, Some(-60), Some(30))],
                vec![c2_timed_out],
                vec![],
                true,
                Some(30),
            ),
        },
        Case {
            name: "progressive, mandatory group failed",
            strategy: spec().mandatory("group1").deadline("90s").window(int(3)).progressive(),
            groups: pairs(),
            existing: vec![
                has("cluster1", G1, Failed, Some(-120)),
                has("cluster2", G1, Failed, Some(-60)),
            ],
            expect: expect(
                vec![want("cluster2", G1, Failed, Some(-60), Some(30))],
                vec![want("cluster1", G1, TimeOut, Some(-120), Some(-30))],
                vec![],
                true,
                Some(30),
            ),
        },
        Case {
            name: "progressive, mandatory group succeeded",
            strategy: spec().mandatory("group1").deadline("").window(int(3)).progressive(),
            groups: pairs(),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Succeeded, Some(-120)),
            ],
            expect: expect(
                vec![new("cluster3", I1), new("cluster4", I1), new("cluster5", I2)],
                vec![],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "progressive, mandatory group succeeded, clusters added after the rollout",
            strategy: spec().mandatory("group1").deadline("90s").window(int(3)).progressive(),
            groups: groups(&[
                ("group1", 0, &["cluster1", "cluster2", "cluster7"]),
                ("", 1, &["cluster3", "cluster4", "cluster8"]),
                ("", 2, &["cluster5", "cluster6", "cluster9"]),
            ]),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Succeeded, Some(-60)),
                has("cluster3", I1, Succeeded, Some(-60)),
                has("cluster4", I1, Progressing, Some(-60)),
                has("cluster5", I2, Progressing, Some(-60)),
            ],
            // The mandatory phase classifies every status, so c4 and c5 come with c7.
            expect: expect(
                vec![
                    want("cluster4", I1, Progressing, Some(-60), Some(30)),
                    want("cluster5", I2, Progressing, Some(-60), Some(30)),
                    new("cluster7", G1),
                ],
                vec![],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "progressive, mandatory group1, 90s, cluster removed from it",
            strategy: spec().mandatory("group1").deadline("90s").window(int(2)).progressive(),
            groups: groups(&[
                ("group1", 0, &["cluster1", "cluster3"]),
                ("", 1, &["cluster4", "cluster5", "cluster6"]),
            ]),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Failed, Some(-120)),
                has("cluster3", G1, Succeeded, Some(-60)),
            ],
            expect: expect(
                vec![new("cluster4", I1), new("cluster5", I1)],
                vec![],
                vec![has("cluster2", G1, Failed, Some(-120))],
                false,
                None,
            ),
        },
    ]);
}
