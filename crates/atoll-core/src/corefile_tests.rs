use proptest::prelude::*;

use super::*;

const KUBEADM: &str = ".:53 {\n    errors\n    health {\n       lameduck 5s\n    }\n    ready\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n       ttl 30\n    }\n    prometheus :9153\n    forward . /etc/resolv.conf {\n       max_concurrent 1000\n    }\n    cache 30\n    loop\n    reload\n    loadbalance\n}\n";

fn wiring(target: &str) -> Wiring {
    Wiring {
        zone: "clusterset.local".into(),
        targets: vec![target.into()],
        cache_seconds: 5,
        bind: vec![],
    }
}

fn changed(edit: Edit) -> String {
    match edit {
        Edit::Changed(text) => text,
        Edit::Unchanged => panic!("expected a change"),
    }
}

#[test]
fn wiring_appends_the_block_and_keeps_the_rest() {
    let text = changed(wire(KUBEADM, &wiring("10.96.0.53:53")).unwrap());
    assert!(text.starts_with(KUBEADM), "the user's part is untouched");
    assert_eq!(
        &text[KUBEADM.len()..],
        "# BEGIN atoll: clusterset.local -> atoll dns (managed by Atoll; `atoll coredns unwire` removes it)\nclusterset.local {\n    errors\n    cache 5 {\n        denial 9984 1\n    }\n    forward . 10.96.0.53:53\n}\n# END atoll\n"
    );
    assert_eq!(
        wired(&text).unwrap(),
        Some(vec!["10.96.0.53:53".to_owned()])
    );
    assert_eq!(wired(KUBEADM).unwrap(), None);
}

#[test]
fn wiring_twice_changes_nothing() {
    let once = changed(wire(KUBEADM, &wiring("10.96.0.53:53")).unwrap());
    assert_eq!(
        wire(&once, &wiring("10.96.0.53:53")).unwrap(),
        Edit::Unchanged
    );
}

#[test]
fn a_new_target_replaces_the_block_where_it_is() {
    let once = changed(wire(KUBEADM, &wiring("10.96.0.53:53")).unwrap());
    let with_more = format!("{once}# a user's comment after it\n");
    let again = changed(wire(&with_more, &wiring("10.96.0.99:53")).unwrap());
    assert!(again.ends_with("# END atoll\n# a user's comment after it\n"));
    assert_eq!(
        wired(&again).unwrap(),
        Some(vec!["10.96.0.99:53".to_owned()])
    );
    assert_eq!(again.matches(BEGIN_MARKER).count(), 1);
}

#[test]
fn unwiring_restores_the_file_byte_for_byte() {
    let text = changed(wire(KUBEADM, &wiring("10.96.0.53:53")).unwrap());
    assert_eq!(changed(unwire(&text).unwrap()), KUBEADM);
    assert_eq!(unwire(KUBEADM).unwrap(), Edit::Unchanged);
}

#[test]
fn bind_addresses_go_into_the_block() {
    let w = Wiring {
        bind: vec!["127.0.0.1".into()],
        ..wiring("127.0.0.1:19301")
    };
    assert!(w.block().contains("\n    bind 127.0.0.1\n"));
}

#[test]
fn a_users_own_block_for_the_zone_is_left_alone() {
    for user in [
        "clusterset.local {\n    forward . 1.2.3.4\n}\n",
        "clusterset.local:53 {\n    forward . 1.2.3.4\n}\n",
        "dns://clusterset.local. {\n    forward . 1.2.3.4\n}\n",
        "example.org clusterset.local {\n    whoami\n}\n",
    ] {
        let corefile = format!("{KUBEADM}{user}");
        assert!(
            matches!(
                wire(&corefile, &wiring("10.96.0.53:53")),
                Err(CorefileError::ForeignBlock { line: 21, .. })
            ),
            "{user}"
        );
    }
    // A longer name is not the zone.
    let other = format!("{KUBEADM}svc.clusterset.local.example {{\n    whoami\n}}\n");
    assert!(wire(&other, &wiring("10.96.0.53:53")).is_ok());
}

#[test]
fn broken_markers_are_errors_not_guesses() {
    let unterminated = format!("{KUBEADM}{BEGIN_MARKER}: x\nclusterset.local {{\n}}\n");
    assert_eq!(
        wire(&unterminated, &wiring("1.1.1.1:53")),
        Err(CorefileError::Unterminated { line: 21 })
    );
    assert_eq!(
        unwire(&unterminated),
        Err(CorefileError::Unterminated { line: 21 })
    );
    let block = wiring("1.1.1.1:53").block();
    let twice = format!("{block}{block}");
    assert!(matches!(
        unwire(&twice),
        Err(CorefileError::Repeated { first: 1, .. })
    ));
    assert_eq!(
        wire(
            KUBEADM,
            &Wiring {
                targets: vec![],
                ..wiring("x")
            }
        ),
        Err(CorefileError::NoTarget)
    );
}

#[test]
fn a_wiring_that_could_break_the_corefile_is_refused_and_nothing_is_written() {
    for bad in [
        Wiring {
            zone: ".".into(),
            ..wiring("10.96.0.53:53")
        },
        wiring("10.96.0.53:53 }\nexample.com {"),
        wiring("10.96.0.53"),
        Wiring {
            bind: vec!["0.0.0.0 }".into()],
            ..wiring("10.96.0.53:53")
        },
    ] {
        assert!(
            matches!(wire(KUBEADM, &bad), Err(CorefileError::Input(_))),
            "{bad:?} accepted"
        );
    }
    // Accepted values are written in canonical form.
    let canonical = Wiring {
        zone: "ClusterSet.Local.".into(),
        ..wiring("[FD00::53]:53")
    };
    let text = changed(wire(KUBEADM, &canonical).unwrap());
    assert!(text.contains("\nclusterset.local {\n") && text.contains("forward . [fd00::53]:53\n"));
}

#[test]
fn a_file_without_a_final_newline_gets_one_before_the_block() {
    let text = changed(wire(".:53 {\n    whoami\n}", &wiring("1.1.1.1:53")).unwrap());
    assert!(text.starts_with(".:53 {\n    whoami\n}\n# BEGIN atoll"));
    assert_eq!(changed(unwire(&text).unwrap()), ".:53 {\n    whoami\n}\n");
}

/// Corefile-like text without Atoll's markers or a clusterset.local block, ending in a newline.
fn corefile() -> impl Strategy<Value = String> {
    proptest::collection::vec("[ a-z0-9.:{}#/\t-]{0,30}", 0..30).prop_map(|lines| {
        lines
            .into_iter()
            .filter(|l| !l.contains("clusterset") && !l.contains("atoll"))
            .map(|l| l + "\n")
            .collect::<String>()
    })
}

proptest! {
    #[test]
    fn unwire_undoes_wire_and_wire_is_idempotent(text in corefile(), port in 1u16..) {
        let w = wiring(&format!("10.0.0.1:{port}"));
        let once = match wire(&text, &w).unwrap() {
            Edit::Changed(t) => t,
            Edit::Unchanged => unreachable!("the text has no block"),
        };
        prop_assert!(once.starts_with(&text));
        prop_assert_eq!(wire(&once, &w).unwrap(), Edit::Unchanged);
        prop_assert_eq!(unwire(&once).unwrap(), Edit::Changed(text.clone()));
        prop_assert_eq!(wired(&once).unwrap(), Some(w.targets.clone()));
    }
}

#[test]
fn the_cache_holds_no_such_name_for_at_most_a_second() {
    let block = |cache_seconds| {
        Wiring {
            cache_seconds,
            ..wiring("10.96.0.53:53")
        }
        .block()
    };
    assert!(block(5).contains("    cache 5 {\n        denial 9984 1\n    }\n"));
    assert!(block(30).contains("    cache 30 {\n        denial 9984 1\n    }\n"));
    // A cache of a second or less caps denials by itself: no sub-block.
    assert!(block(1).contains("    cache 1\n    forward"));
    assert!(!block(0).contains("cache"));
}

#[test]
fn wiring_replaces_a_block_written_before_denials_were_capped() {
    let before = format!(
        "{KUBEADM}# BEGIN atoll: clusterset.local -> atoll dns (managed by Atoll; `atoll coredns unwire` removes it)\nclusterset.local {{\n    errors\n    cache 5\n    forward . 10.96.0.53:53\n}}\n# END atoll\n"
    );
    let after = changed(wire(&before, &wiring("10.96.0.53:53")).unwrap());
    assert_eq!(
        after,
        changed(wire(KUBEADM, &wiring("10.96.0.53:53")).unwrap())
    );
    assert_eq!(
        wire(&after, &wiring("10.96.0.53:53")).unwrap(),
        Edit::Unchanged
    );
}
