//! `schedules` in the config, and what every schedule is made of (SPEC §13): a five-field cron
//! or `@daily`-style name in a named IANA time zone (croner over chrono-tz, so due times follow
//! daylight saving), and its `overlap` and `missed` policies.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use croner::Cron;
use serde::Deserialize;

/// One `schedules[]` entry: a schedule kept in step with the config at every start.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleConfig {
    /// Its id in the API (`GET /v1/schedules/{id}`).
    pub id: String,
    pub agent: String,
    #[serde(alias = "input")]
    pub prompt: String,
    pub cron: String,
    #[serde(default = "utc")]
    pub timezone: String,
    /// The user its runs belong to; none: the server's own.
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub conversation_id: Option<String>,
    #[serde(default)]
    pub overlap: Overlap,
    #[serde(default)]
    pub missed: Missed,
    /// A receiver told when its runs end (signed with `webhookDelivery.secret`).
    #[serde(default)]
    pub webhook_url: Option<String>,
    #[serde(default = "enabled")]
    pub enabled: bool,
}

fn utc() -> String {
    "UTC".into()
}

fn enabled() -> bool {
    true
}

/// Checks every configured schedule's cron and zone; `(path, message)` of the first problem.
pub fn check(schedules: &[ScheduleConfig]) -> Result<(), (String, String)> {
    for (index, schedule) in schedules.iter().enumerate() {
        Timetable::parse(&schedule.cron, &schedule.timezone)
            .map_err(|(field, why)| (format!("schedules[{index}].{field}"), why))?;
    }
    Ok(())
}

/// What a due time does while the schedule's previous run still runs.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Overlap {
    #[default]
    Skip,
    Queue,
    Allow,
}

impl Overlap {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::Queue => "queue",
            Self::Allow => "allow",
        }
    }

    pub fn parse(text: &str) -> Self {
        match text {
            "queue" => Self::Queue,
            "allow" => Self::Allow,
            _ => Self::Skip,
        }
    }
}

/// What a due time found late does.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Missed {
    #[default]
    Skip,
    RunOnce,
}

impl Missed {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::RunOnce => "run_once",
        }
    }

    pub fn parse(text: &str) -> Self {
        if text == "run_once" {
            Self::RunOnce
        } else {
            Self::Skip
        }
    }
}

/// A schedule's cron in its zone.
#[derive(Debug, Clone)]
pub struct Timetable {
    cron: Cron,
    zone: chrono_tz::Tz,
}

impl Timetable {
    /// The cron (five fields, or a name such as `@daily`) and the IANA zone; `(field, why)` of
    /// the one that is wrong.
    pub fn parse(cron: &str, timezone: &str) -> Result<Self, (&'static str, String)> {
        if cron.split_whitespace().count() > 5 {
            return Err((
                "cron",
                "five fields (minute hour day month weekday) or a name such as @daily".into(),
            ));
        }
        let parsed =
            Cron::from_str(cron).map_err(|e| ("cron", format!("{cron:?} is not a cron: {e}")))?;
        let zone = chrono_tz::Tz::from_str(timezone).map_err(|_| {
            (
                "timezone",
                format!("{timezone:?} is not an IANA time zone such as Europe/Paris"),
            )
        })?;
        Ok(Self { cron: parsed, zone })
    }

    /// The first due time strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&self.zone);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|next| next.with_timezone(&Utc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("time")
            .with_timezone(&Utc)
    }

    /// 02:30 every day in Paris: on the spring-forward day 02:30 does not exist (02:00 → 03:00);
    /// on the fall-back day it exists twice and fires once.
    #[test]
    fn due_times_follow_daylight_saving_in_the_named_zone() {
        let table = Timetable::parse("30 2 * * *", "Europe/Paris").expect("parses");
        // 2026-03-29: clocks go 02:00 → 03:00 in Paris.
        let spring = table.next_after(at("2026-03-28T12:00:00Z")).expect("next");
        assert_ne!(spring, at("2026-03-29T01:30:00Z"), "no 02:30 that day");
        let daily = Timetable::parse("0 8 * * *", "Europe/Paris").expect("parses");
        assert_eq!(
            daily.next_after(at("2026-03-28T12:00:00Z")),
            Some(at("2026-03-29T06:00:00Z"))
        );
        assert_eq!(
            daily.next_after(at("2026-03-27T12:00:00Z")),
            Some(at("2026-03-28T07:00:00Z"))
        );
        // 2026-10-25: 02:30 happens twice; it fires once.
        let first = table.next_after(at("2026-10-24T12:00:00Z")).expect("first");
        let second = table.next_after(first).expect("second");
        assert!((second - first).num_hours() >= 23, "{first} then {second}");
    }

    #[test]
    fn names_and_five_fields_parse_and_bad_ones_name_the_field() {
        assert!(Timetable::parse("@daily", "UTC").is_ok());
        assert!(Timetable::parse("*/5 * * * 1-5", "America/New_York").is_ok());
        assert_eq!(
            Timetable::parse("61 * * * *", "UTC").expect_err("bad").0,
            "cron"
        );
        assert_eq!(
            Timetable::parse("0 0 * * * *", "UTC").expect_err("six").0,
            "cron"
        );
        assert_eq!(
            Timetable::parse("@daily", "Mars/Olympus")
                .expect_err("zone")
                .0,
            "timezone"
        );
    }
}
