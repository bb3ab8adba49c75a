//! sdk-go's `All` and `ProgressivePerGroup` cases (`TestGetRolloutCluster_All`,
//! `_ProgressivePerGroup`, and the added- and removed-cluster cases of both).

use super::*;

/// The `All` statuses of sdk-go: two in `group1`, three in group 1.
fn all_statuses() -> Vec<ClusterStatus> {
    vec![
        has("cluster1", G1, Succeeded, Some(-60)),
        has("cluster2", G1, Failed, Some(-120)),
        has("cluster3", I1, Progressing, Some(-120)),
        has("cluster4", I1, Failed, Some(-60)),
        has("cluster5", I1, Progressing, Some(-60)),
    ]
}

#[test]
fn all_matches_sdk_go() {
    let two = groups(&[
        ("group1", 0, &["cluster1", "cluster2"]),
        ("", 1, &["cluster3", "cluster4", "cluster5", "cluster6"]),
    ]);
    let c2_timed_out = want("cluster2", G1, TimeOut, Some(-120), Some(-30));
    let c3_timed_out = want("cluster3", I1, TimeOut, Some(-120), Some(-30));
    run(vec![
        Case {
            name: "all, 90s, nothing applied yet",
            strategy: spec().deadline("90s").all(),
            groups: two.clone(),
            existing: vec![],
            expect: expect(
                vec![
                    new("cluster1", G1),
                    new("cluster2", G1),
                    new("cluster3", I1),
                    new("cluster4", I1),
                    new("cluster5", I1),
                    new("cluster6", I1),
                ],
                vec![],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "all, 90s",
            strategy: spec().deadline("90s").all(),
            groups: two,
            existing: all_statuses(),
            expect: expect(
                vec![
                    want("cluster4", I1, Failed, Some(-60), Some(30)),
                    want("cluster5", I1, Progressing, Some(-60), Some(30)),
                    new("cluster6", I1),
                ],
                vec![c2_timed_out.clone(), c3_timed_out.clone()],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "all, 90s, cluster added",
            strategy: spec().deadline("90s").all(),
            groups: groups(&[
                ("group1", 0, &["cluster1", "cluster2", "cluster7"]),
                ("", 1, &["cluster3", "cluster4", "cluster5", "cluster6"]),
            ]),
            existing: all_statuses(),
            expect: expect(
                vec![
                    want("cluster4", I1, Failed, Some(-60), Some(30)),
                    want("cluster5", I1, Progressing, Some(-60), Some(30)),
                    new("cluster6", I1),
                    new("cluster7", G1),
                ],
                vec![c2_timed_out, c3_timed_out.clone()],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "all, 90s, clusters removed",
            strategy: spec().deadline("90s").all(),
            groups: groups(&[("group1", 0, &["cluster1"]), ("", 1, &["cluster3", "cluster5"])]),
            existing: all_statuses(),
            expect: expect(
                vec![want("cluster5", I1, Progressing, Some(-60), Some(30))],
                vec![c3_timed_out],
                vec![
                    has("cluster2", G1, Failed, Some(-120)),
                    has("cluster4", I1, Failed, Some(-60)),
                ],
                false,
                Some(30),
            ),
        },
    ]);
}

#[test]
fn per_group_matches_sdk_go() {
    let c2_timed_out = want("cluster2", G1, TimeOut, Some(-120), Some(-30));
    let first_done_but_c2 = vec![
        has("cluster1", G1, Succeeded, Some(-60)),
        has("cluster2", G1, Failed, Some(-120)),
        has("cluster3", G1, Succeeded, Some(-60)),
    ];
    let mut second_done = first_done_but_c2.clone();
    second_done
        .extend(["cluster4", "cluster5", "cluster6"].map(|c| has(c, I1, Succeeded, Some(-60))));
    let mut waiting = vec![has("cluster1", G1, Progressing, Some(-60))];
    waiting.extend(["cluster2", "cluster3"].map(|c| has(c, G1, ToApply, None)));
    waiting.extend(["cluster4", "cluster5", "cluster6"].map(|c| has(c, I1, ToApply, None)));
    run(vec![
        Case {
            name: "per group, 90s, nothing applied yet",
            strategy: spec().deadline("90s").per_group(),
            groups: two_groups(),
            existing: vec![],
            expect: expect(
                vec![new("cluster1", G1), new("cluster2", G1), new("cluster3", G1)],
                vec![],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "per group, 90s, statuses ToApply",
            strategy: spec().deadline("90s").per_group(),
            groups: two_groups(),
            existing: waiting,
            expect: expect(
                vec![
                    want("cluster1", G1, Progressing, Some(-60), Some(30)),
                    new("cluster2", G1),
                    new("cluster3", G1),
                ],
                vec![],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "per group, 90s",
            strategy: spec().deadline("90s").per_group(),
            groups: two_groups(),
            existing: done_failed_applying(),
            expect: expect(
                vec![want("cluster3", G1, Progressing, Some(-60), Some(30))],
                vec![c2_timed_out.clone()],
                vec![],
                true,
                Some(30),
            ),
        },
        Case {
            name: "per group, 90s, first group timed out, maxFailures 2",
            strategy: spec().deadline("90s").fails(int(2)).per_group(),
            groups: three_groups(),
            existing: first_done_but_c2.clone(),
            expect: expect(
                vec![new("cluster4", I1), new("cluster5", I1), new("cluster6", I1)],
                vec![c2_timed_out.clone()],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "per group, 90s, first group timed out, second succeeded",
            strategy: spec().deadline("90s").fails(int(2)).per_group(),
            groups: three_groups(),
            existing: second_done,
            expect: expect(
                vec![new("cluster7", I2), new("cluster8", I2), new("cluster9", I2)],
                vec![c2_timed_out],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "per group, no deadline, first group failing",
            strategy: spec().deadline("None").per_group(),
            groups: three_groups(),
            existing: first_done_but_c2.clone(),
            expect: expect(
                vec![want("cluster2", G1, Failed, Some(-120), None)],
                vec![],
                vec![],
                true,
                None,
            ),
        },
        Case {
            name: "per group, no deadline, one failing in the first group, maxFailures 2",
            strategy: spec().deadline("None").fails(int(2)).per_group(),
            groups: three_groups(),
            existing: first_done_but_c2,
            expect: expect(
                vec![
                    want("cluster2", G1, Failed, Some(-120), None),
                    new("cluster4", I1),
                    new("cluster5", I1),
                    new("cluster6", I1),
                ],
                vec![],
                vec![],
                false,
                None,
            ),
        },
        Case {
            name: "per group, no deadline, two failing in the first group, maxFailures 30%",
            strategy: spec().deadline("None").fails(pct("30%")).per_group(),
            groups: three_groups(),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Failed, Some(-120)),
                has("cluster3", G1, Failed, Some(-120)),
            ],
            expect: expect(
                vec![
                    want("cluster2", G1, Failed, Some(-120), None),
                    want("cluster3", G1, Failed, Some(-120), None),
                ],
                vec![],
                vec![],
                true,
                None,
            ),
        },
        Case {
            name: "per group, minSuccessTime and mixed states",
            strategy: spec().deadline("90s").fails(pct("50%")).soak("1m").per_group(),
            groups: groups(&[
                ("group1", 0, &["cluster1", "cluster2", "cluster3"]),
                ("group2", 1, &["cluster4", "cluster5"]),
            ]),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-30)),
                has("cluster2", G1, Succeeded, Some(-120)),
                has("cluster3", G1, Progressing, Some(-30)),
            ],
            expect: expect(
                vec![
                    want("cluster1", G1, Succeeded, Some(-30), Some(30)),
                    want("cluster3", G1, Progressing, Some(-30), Some(60)),
                ],
                vec![],
                vec![],
                false,
                Some(30),
            ),
        },
    ]);
}

#[test]
fn per_group_mandatory_and_membership_changes_match_sdk_go() {
    let c2_timed_out = want("cluster2", G1, TimeOut, Some(-120), Some(-30));
    let first_done_but_c2 = vec![
        has("cluster1", G1, Succeeded, Some(-60)),
        has("cluster2", G1, Failed, Some(-120)),
        has("cluster3", G1, Succeeded, Some(-60)),
    ];
    /// `group1` (0) holding c1 and c3, then `rest`.
    fn c1_c3(rest: &[(&str, i32, &[&str])]) -> Groups {
        let mut spec: Vec<(&str, i32, &[&str])> = vec![("group1", 0, &["cluster1", "cluster3"])];
        spec.extend_from_slice(rest);
        groups(&spec)
    }
    let c4_c6: (&str, i32, &[&str]) = ("", 1, &["cluster4", "cluster5", "cluster6"]);
    let c7_c9: (&str, i32, &[&str]) = ("", 2, &["cluster7", "cluster8", "cluster9"]);
    let next_group = vec![new("cluster4", I1), new("cluster5", I1), new("cluster6", I1)];
    run(vec![
        Case {
            name: "per group, mandatory group failing, 90s",
            strategy: spec().mandatory("group1").deadline("90s").per_group(),
            groups: two_groups(),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Failed, Some(-120)),
                has("cluster3", G1, Failed, Some(-120)),
            ],
            expect: expect(
                vec![],
                vec![c2_timed_out.clone(), want("cluster3", G1, TimeOut, Some(-120), Some(-30))],
                vec![],
                true,
                None,
            ),
        },
        Case {
            name: "per group, mandatory group failing one, 90s, maxFailures 2",
            strategy: spec().mandatory("group1").deadline("90s").fails(int(2)).per_group(),
            groups: three_groups(),
            existing: first_done_but_c2.clone(),
            expect: expect(vec![], vec![c2_timed_out], vec![], true, None),
        },
        Case {
            name: "per group, mandatory group succeeded, 90s",
            strategy: spec().mandatory("group1").deadline("90s").per_group(),
            groups: three_groups(),
            existing: ["cluster1", "cluster2", "cluster3"]
                .map(|c| has(c, G1, Succeeded, Some(-60)))
                .into(),
            expect: expect(next_group.clone(), vec![], vec![], false, None),
        },
        Case {
            name: "per group, 90s, cluster added after the rollout started",
            strategy: spec().deadline("90s").per_group(),
            groups: two_groups(),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Succeeded, Some(-60)),
                has("cluster4", I1, Progressing, Some(-60)),
                has("cluster5", I1, Progressing, Some(-60)),
            ],
            expect: expect(
                vec![
                    want("cluster4", I1, Progressing, Some(-60), Some(30)),
                    want("cluster5", I1, Progressing, Some(-60), Some(30)),
                    new("cluster3", G1),
                ],
                vec![],
                vec![],
                false,
                Some(30),
            ),
        },
        Case {
            name: "per group, 90s, cluster removed after the rollout started",
            strategy: spec().deadline("90s").per_group(),
            groups: c1_c3(&[c4_c6]),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Failed, Some(-60)),
                has("cluster3", G1, Progressing, Some(-60)),
            ],
            expect: expect(
                vec![want("cluster3", G1, Progressing, Some(-60), Some(30))],
                vec![],
                vec![has("cluster2", G1, Failed, Some(-60))],
                false,
                Some(30),
            ),
        },
        Case {
            name: "per group, 90s, cluster removed while its group timed out",
            strategy: spec().deadline("90s").fails(int(2)).per_group(),
            groups: c1_c3(&[c4_c6]),
            existing: vec![
                has("cluster1", G1, Succeeded, Some(-60)),
                has("cluster2", G1, Failed, Some(-60)),
                has("cluster3", G1, Progressing, Some(-120)),
            ],
            expect: expect(
                next_group.clone(),
                vec![want("cluster3", G1, TimeOut, Some(-120), Some(-30))],
                vec![has("cluster2", G1, Failed, Some(-60))],
                false,
                None,
            ),
        },
        Case {
            name: "per group, mandatory group1, 90s, cluster removed from it",
            strategy: spec().mandatory("group1").deadline("90s").per_group(),
            groups: c1_c3(&[c4_c6, c7_c9]),
            existing: first_done_but_c2.clone(),
            expect: expect(
                next_group,
                vec![],
                vec![has("cluster2", G1, Failed, Some(-120))],
                false,
                None,
            ),
        },
    ]);
}
