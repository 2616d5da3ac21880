//! Which records of a response fit a transport's size limit. A response that does not fit
//! loses, in this order, its additional records (addresses of SRV targets: a client can look
//! them up), the Extended DNS Error text of a negative answer, the SOA of the authority
//! section, then answer records from the end. Records go whole, so what is sent always parses,
//! and the answers sent are the first ones of the full answer. (The zone never sends an
//! authority SOA beside answers; the only Extended DNS Error beside answers says the zone cut
//! that name's records, and it stays. For its responses this is "additional records, then
//! answers" and, for negative answers, "the error text, then the SOA".)
//!
//! TC is set only over UDP and only when an answer or authority record was left out: RFC 2181
//! §9 sets it when a required RRset could not be sent whole, not when additional information
//! was left out, and over TCP there is nowhere bigger to retry, so a TCP answer is the records
//! that fit (at least one answer record, since any single record the zone holds fits in
//! 65,535 bytes with its question).

/// The sections of a full response after header and question, as pre-encoded records.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sections<'a> {
    pub answers: &'a [u8],
    pub answer_count: u16,
    /// Zero or one whole record (the zone's SOA).
    pub authority: &'a [u8],
    pub additional: &'a [u8],
    pub additional_count: u16,
    /// Bytes of the OPT record with its Extended DNS Error and without it; `None` when the
    /// query had no OPT record (then the response has none either).
    pub opt: Option<(usize, usize)>,
}

/// What of [`Sections`] to send: byte lengths are whole records from each section's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fit {
    pub answer_bytes: usize,
    pub answer_count: u16,
    pub authority: bool,
    pub additional_bytes: usize,
    pub additional_count: u16,
    /// Whether the OPT record keeps its Extended DNS Error.
    pub ede: bool,
    /// Whether TC is set.
    pub truncated: bool,
}

impl Fit {
    /// Everything of `sections`.
    fn whole(sections: &Sections<'_>) -> Self {
        Self {
            answer_bytes: sections.answers.len(),
            answer_count: sections.answer_count,
            authority: true,
            additional_bytes: sections.additional.len(),
            additional_count: sections.additional_count,
            ede: true,
            truncated: false,
        }
    }

    /// Bytes of the response this fit makes, `fixed` being header and question.
    pub fn len(&self, fixed: usize, sections: &Sections<'_>) -> usize {
        let opt = sections
            .opt
            .map_or(0, |(full, bare)| if self.ede { full } else { bare });
        let authority = if self.authority {
            sections.authority.len()
        } else {
            0
        };
        fixed + self.answer_bytes + authority + self.additional_bytes + opt
    }
}

/// What of `sections` to send in at most `limit` bytes after `fixed` bytes of header and
/// question, over TCP when `tcp` is true.
pub(crate) fn fit(fixed: usize, sections: &Sections<'_>, limit: usize, tcp: bool) -> Fit {
    let mut fit = Fit::whole(sections);
    let fits = |fit: &Fit| fit.len(fixed, sections) <= limit;
    if fits(&fit) {
        return fit;
    }
    (fit.additional_bytes, fit.additional_count) = (0, 0);
    let room = limit.saturating_sub(fit.len(fixed, sections));
    (fit.additional_bytes, fit.additional_count) =
        whole_records(sections.additional, sections.additional_count, room);
    if fits(&fit) {
        return fit;
    }
    (fit.additional_bytes, fit.additional_count) = (0, 0);
    // A negative answer gives up its error text before its SOA; answers keep theirs (it says
    // the zone itself cut them) and give up records instead.
    if sections.answers.is_empty() {
        fit.ede = false;
        if fits(&fit) {
            return fit;
        }
    }
    if !sections.authority.is_empty() {
        fit.authority = false;
        fit.truncated = !tcp;
        if fits(&fit) {
            return fit;
        }
    }
    (fit.answer_bytes, fit.answer_count) = (0, 0);
    if !fits(&fit) {
        // Not even the error text fits beside the header: it goes too.
        fit.ede = false;
    }
    let room = limit.saturating_sub(fit.len(fixed, sections));
    (fit.answer_bytes, fit.answer_count) =
        whole_records(sections.answers, sections.answer_count, room);
    fit.truncated |= fit.answer_count < sections.answer_count && !tcp;
    fit
}

/// Bytes and number of the leading whole records of `section` (`count` records) that fit in
/// `room` bytes.
fn whole_records(section: &[u8], count: u16, room: usize) -> (usize, u16) {
    let mut at = 0;
    for kept in 0..count {
        match record_len(section, at) {
            Some(len) if at + len <= room => at += len,
            _ => return (at, kept),
        }
    }
    (at, count)
}

/// Length of the resource record at `at`: owner name (labels, or ending in a compression
/// pointer), type, class, TTL, RDLENGTH and RDATA. `None` when it runs past the section.
pub(crate) fn record_len(section: &[u8], at: usize) -> Option<usize> {
    let mut end = at;
    loop {
        let len = *section.get(end)?;
        if len & 0xc0 == 0xc0 {
            end += 2;
            break;
        }
        end += 1 + usize::from(len);
        if len == 0 {
            break;
        }
    }
    let rdlength = usize::from(u16::from_be_bytes([
        *section.get(end + 8)?,
        *section.get(end + 9)?,
    ]));
    let end = end + 10 + rdlength;
    (end <= section.len()).then_some(end - at)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::wire::{push_rr, push_rr_tail, rtype};

    /// Records of the shapes the zone encodes: answers owned by a pointer to the question,
    /// additional and authority records with their names spelled out.
    fn answers(rdata_lengths: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        for len in rdata_lengths {
            out.extend_from_slice(&[0xc0, 0x0c]);
            push_rr_tail(&mut out, rtype::SRV, 5, &vec![7; *len]);
        }
        out
    }

    fn named(records: &[(usize, usize)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (label, rdata) in records {
            let mut owner = vec![*label as u8];
            owner.extend(std::iter::repeat_n(b'a', *label));
            owner.extend_from_slice(b"\x05local\x00");
            push_rr(&mut out, &owner, rtype::A, 5, &vec![1; *rdata]);
        }
        out
    }

    /// Offsets where the records of `section` end.
    fn boundaries(section: &[u8]) -> Vec<usize> {
        let mut ends = vec![0];
        let mut at = 0;
        while let Some(len) = record_len(section, at) {
            at += len;
            ends.push(at);
        }
        ends
    }

    #[derive(Debug, Clone)]
    struct Case {
        fixed: usize,
        answers: Vec<u8>,
        answer_count: u16,
        authority: Vec<u8>,
        additional: Vec<u8>,
        additional_count: u16,
        opt: Option<(usize, usize)>,
        limit: usize,
        tcp: bool,
    }

    impl Case {
        fn sections(&self) -> Sections<'_> {
            Sections {
                answers: &self.answers,
                answer_count: self.answer_count,
                authority: &self.authority,
                additional: &self.additional,
                additional_count: self.additional_count,
                opt: self.opt,
            }
        }
    }

    fn case() -> impl Strategy<Value = Case> {
        (
            // Header and a question of 5 to 259 name bytes.
            (12 + 5 + 4)..(12 + 259 + 4usize),
            proptest::collection::vec(4usize..300, 0..400),
            proptest::option::of((1usize..63, 20usize..300)),
            proptest::collection::vec((1usize..63, prop_oneof![Just(4usize), Just(16)]), 0..300),
            proptest::option::of(0usize..206),
            prop_oneof![Just(512usize), Just(1232), 512usize..4097, Just(65535)],
            any::<bool>(),
        )
            .prop_map(
                |(fixed, answer_rdata, soa, additional, ede, limit, tcp)| Case {
                    fixed,
                    answer_count: answer_rdata.len() as u16,
                    answers: answers(&answer_rdata),
                    authority: soa.map(|s| named(&[s])).unwrap_or_default(),
                    additional_count: additional.len() as u16,
                    additional: named(&additional),
                    opt: ede.map(|text| (11 + if text > 0 { 6 + text } else { 0 }, 11)),
                    limit: if tcp { 65535 } else { limit },
                    tcp,
                },
            )
    }

    #[test]
    fn an_answer_that_fits_is_sent_whole() {
        let answers = answers(&[4, 4]);
        let additional = named(&[(5, 4)]);
        let sections = Sections {
            answers: &answers,
            answer_count: 2,
            authority: &[],
            additional: &additional,
            additional_count: 1,
            opt: Some((11, 11)),
        };
        let fit = fit(40, &sections, 512, false);
        assert_eq!(fit, Fit::whole(&sections));
    }

    #[test]
    fn additional_records_go_first_and_without_tc() {
        // 10 answers of 16 bytes, 20 additional records of 27 bytes: 40 + 160 + 540 = 740.
        let answers = answers(&[4; 10]);
        let additional = named(&[(5, 4); 20]);
        let sections = Sections {
            answers: &answers,
            answer_count: 10,
            authority: &[],
            additional: &additional,
            additional_count: 20,
            opt: None,
        };
        let fit = fit(40, &sections, 512, false);
        assert_eq!((fit.answer_count, fit.additional_count), (10, 11));
        assert!(!fit.truncated, "left-out additional records need no retry");
        // Fewer answers: TC over UDP, none over TCP.
        let squeezed = super::fit(40, &sections, 150, false);
        assert_eq!((squeezed.answer_count, squeezed.additional_count), (6, 0));
        assert!(squeezed.truncated);
        assert!(!super::fit(40, &sections, 150, true).truncated);
    }

    proptest! {
        #[test]
        fn every_trimmed_response_fits_keeps_whole_leading_records_and_sets_tc_only_over_udp(
            case in case()
        ) {
            let sections = case.sections();
            let fit = fit(case.fixed, &sections, case.limit, case.tcp);
            let whole = Fit::whole(&sections);
            let bare = case.fixed + case.opt.map_or(0, |(_, bare)| bare);
            // Header, question and a bare OPT always fit (they take at most 286 bytes).
            prop_assert!(bare <= case.limit);
            prop_assert!(fit.len(case.fixed, &sections) <= case.limit, "{fit:?} over {}", case.limit);
            if whole.len(case.fixed, &sections) <= case.limit {
                prop_assert_eq!(fit, whole, "what fits is sent whole");
            }
            // Whole records from each section's start.
            let ends = boundaries(&case.answers);
            prop_assert_eq!(ends.get(usize::from(fit.answer_count)), Some(&fit.answer_bytes));
            let ends = boundaries(&case.additional);
            prop_assert_eq!(ends.get(usize::from(fit.additional_count)), Some(&fit.additional_bytes));
            // In order: additional records, the error text, the SOA, answer records.
            let answers_cut = fit.answer_count < case.answer_count;
            let authority_cut = !fit.authority && !case.authority.is_empty();
            let ede_cut = !fit.ede && case.opt.is_some_and(|(full, bare)| full > bare);
            if ede_cut || authority_cut || answers_cut {
                prop_assert_eq!(fit.additional_count, 0);
            }
            if (authority_cut || answers_cut) && case.answer_count == 0 {
                prop_assert!(
                    !fit.ede || case.opt.is_none_or(|(full, bare)| full == bare),
                    "a negative answer's error text goes before its SOA"
                );
            }
            if answers_cut && case.answer_count > 0 && ede_cut {
                // Beside answers the text stays unless it does not fit even without them.
                let alone = Fit { answer_bytes: 0, answer_count: 0, ede: true, ..fit };
                prop_assert!(alone.len(case.fixed, &sections) > case.limit, "the text beside cut answers stays");
            }
            if answers_cut {
                prop_assert!(case.authority.is_empty() || authority_cut, "the SOA goes before answers");
                // As many answer records as fit: one more would not.
                let next = record_len(&case.answers, fit.answer_bytes).unwrap_or(0);
                let with_next = Fit { answer_bytes: fit.answer_bytes + next, ..fit };
                prop_assert!(with_next.len(case.fixed, &sections) > case.limit);
            }
            prop_assert_eq!(
                fit.truncated,
                (answers_cut || authority_cut) && !case.tcp,
                "TC over UDP exactly when records required were left out"
            );
            // Over TCP an answer with records is never sent empty.
            if case.tcp && case.answer_count > 0 {
                prop_assert!(fit.answer_count > 0);
            }
        }
    }
}
