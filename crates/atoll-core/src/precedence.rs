//! Which export is the oldest, when members write their own export times.
//!
//! KEP-1645 gives precedence to the oldest export. A record says when its ServiceExport was
//! created (`spec.exportCreated`), but a member writes that itself: a record that reached the
//! hub yesterday and says 1970 would win every conflict. The hub's own
//! `metadata.creationTimestamp` of the record cannot be forged (the apiserver sets it on
//! create and keeps it on update), so the time that counts is the later of the two: an honest
//! export, whose record reaches the hub moments after the export is made, keeps its own time
//! to the second; a backdated one counts from when the hub first held its record.
//!
//! Ties (1 s resolution) break by cluster id, which no member chooses (the administrator names
//! it at the join). The claim never breaks a tie: a member racing a new record into the same
//! second as another member's, claiming 1970, would win it. The cost: a hub restored by
//! re-creating every record in one second decides the winner of a conflicting service by
//! cluster id, not by which export was made first (re-created over several seconds, by the
//! order of re-creation, as before); every importer decides the same, and the Conflict
//! condition says who lost.

use atoll_api::hub::ExportedService;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The time an export counts from: the later of what the member says and when the hub created
/// its record (`None`: not known, as for a record built in memory).
pub fn effective(claimed: &Time, hub_created: Option<&Time>) -> Time {
    match hub_created {
        Some(hub) if hub.0 > claimed.0 => hub.clone(),
        _ => claimed.clone(),
    }
}

/// The time `record`'s export counts from.
pub fn of_record(record: &ExportedService) -> Time {
    effective(
        &record.spec.export_created,
        record.metadata.creation_timestamp.as_ref(),
    )
}

/// The order of precedence: earlier effective time first, then cluster id.
pub fn key<'a>(effective: &'a Time, cluster: &'a str) -> impl Ord + 'a {
    (effective.0, cluster)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(s: i64) -> Time {
        Time(Timestamp::from_second(s).unwrap())
    }

    #[test]
    fn a_claim_older_than_the_hub_record_counts_from_the_hub() {
        assert_eq!(
            effective(&at(0), Some(&at(1_800_000_000))),
            at(1_800_000_000)
        );
        assert_eq!(
            effective(&at(1_800_000_005), Some(&at(1_800_000_000))),
            at(1_800_000_005)
        );
        assert_eq!(effective(&at(7), None), at(7));
    }
}
