//! Status pages: services, pages with their cards, incidents with their updates, page
//! subscriptions and the pending notifications of incident updates.
//!
//! Every function is scoped by account except the public lookups of a page by its `url`
//! or custom domain (for serving pages), and the use of a subscriber's link token
//! (the token is the credential: [`Store::use_subscription_token`]). Links (card -> service, incident -> service)
//! are written only after the store has checked, in the same transaction, that every
//! linked service belongs to the account; another account's service is never linked.
//! Services link to checks through the check document's `triggerIncident.serviceId`
//! ([`Store::service_checks`]).

mod confirmations;
mod deliveries;
mod incidents;
mod keys;
mod links;
mod pages;
mod services;
mod subscriptions;
mod tokens;

pub use confirmations::{ConfirmationWrite, PendingConfirmation};
pub use deliveries::{DeliveryOutcome, DeliveryWrite};
pub use incidents::{Incident, IncidentUpdate, IncidentUpdateWrite, IncidentWrite};
pub use keys::{MAX_KEYS_PER_PAGE, StatusPageKey};
pub use links::{ServiceCheck, StatusNotification};
pub use pages::{CardWrite, StatusCard, StatusPage, StatusPageWrite};
pub use services::{ServiceDeletion, StatusService};
pub use subscriptions::{BulkOutcome, NewSubscription, PageSubscription};
pub use tokens::{NewToken, SubscriberRef, TokenPurpose, TokenUse};

use uuid::Uuid;

use super::StoreError;

/// Most cards on one page.
pub const MAX_CARDS_PER_PAGE: usize = 50;
/// Most services on one card.
pub const MAX_SERVICES_PER_CARD: usize = 100;
/// Most services one incident names.
pub const MAX_SERVICES_PER_INCIDENT: usize = 100;
/// Most updates one incident keeps.
pub const MAX_UPDATES_PER_INCIDENT: i64 = 1000;
/// Updates shown with an incident and in its update list: the latest ones.
pub const INCIDENT_UPDATES_SHOWN: i64 = 100;
/// Most subscriptions of one page.
pub const MAX_SUBSCRIPTIONS_PER_PAGE: i64 = 10_000;

/// One page of a cursor listing: `next_id` is the id of the first entry of the next
/// page, `None` when there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing<T> {
    pub entries: Vec<T>,
    pub next_id: Option<Uuid>,
}

/// How bad an incident is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IncidentSeverity {
    Critical,
    Major,
    Medium,
    Minor,
}

impl IncidentSeverity {
    pub const ALL: [IncidentSeverity; 4] = [
        IncidentSeverity::Critical,
        IncidentSeverity::Major,
        IncidentSeverity::Medium,
        IncidentSeverity::Minor,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            IncidentSeverity::Critical => "CRITICAL",
            IncidentSeverity::Major => "MAJOR",
            IncidentSeverity::Medium => "MEDIUM",
            IncidentSeverity::Minor => "MINOR",
        }
    }

    pub fn parse(s: &str) -> Option<IncidentSeverity> {
        IncidentSeverity::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// The state of an incident as told by its updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IncidentStatus {
    Investigating,
    Identified,
    Monitoring,
    Resolved,
}

impl IncidentStatus {
    pub const ALL: [IncidentStatus; 4] = [
        IncidentStatus::Investigating,
        IncidentStatus::Identified,
        IncidentStatus::Monitoring,
        IncidentStatus::Resolved,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            IncidentStatus::Investigating => "INVESTIGATING",
            IncidentStatus::Identified => "IDENTIFIED",
            IncidentStatus::Monitoring => "MONITORING",
            IncidentStatus::Resolved => "RESOLVED",
        }
    }

    pub fn parse(s: &str) -> Option<IncidentStatus> {
        IncidentStatus::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// Whether a subscriber confirmed the address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubscriptionStatus {
    Pending,
    Verified,
}

impl SubscriptionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SubscriptionStatus::Pending => "PENDING",
            SubscriptionStatus::Verified => "VERIFIED",
        }
    }

    pub fn parse(s: &str) -> Option<SubscriptionStatus> {
        match s {
            "PENDING" => Some(SubscriptionStatus::Pending),
            "VERIFIED" => Some(SubscriptionStatus::Verified),
            _ => None,
        }
    }
}

/// How a subscriber is told: the reference's EMAIL, or Outpost's WEBHOOK extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubscriptionKind {
    /// `address` is an e-mail address; PENDING until confirmed (unless auto-verified).
    Email,
    /// `address` is an http(s) URL that gets a JSON POST; VERIFIED at creation.
    Webhook,
}

impl SubscriptionKind {
    pub const ALL: [SubscriptionKind; 2] = [SubscriptionKind::Email, SubscriptionKind::Webhook];

    pub fn as_str(self) -> &'static str {
        match self {
            SubscriptionKind::Email => "EMAIL",
            SubscriptionKind::Webhook => "WEBHOOK",
        }
    }

    pub fn parse(s: &str) -> Option<SubscriptionKind> {
        SubscriptionKind::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// The key that makes an address unique on a page: e-mail addresses without
    /// case, URLs exactly (their paths are case-sensitive).
    pub fn address_key(self, address: &str) -> String {
        match self {
            SubscriptionKind::Email => address.to_lowercase(),
            SubscriptionKind::Webhook => address.to_owned(),
        }
    }
}

/// Reads an enum column.
fn enum_col<T>(
    value: &str,
    parse: fn(&str) -> Option<T>,
    table: &'static str,
) -> Result<T, StoreError> {
    parse(value).ok_or_else(|| StoreError::Corrupt {
        table,
        message: format!("unknown value {value:?}"),
    })
}

/// A list of ids as JSON text, for `json_each(?)`.
fn id_list(ids: &[Uuid]) -> String {
    let strings: Vec<String> = ids.iter().map(Uuid::to_string).collect();
    serde_json::to_string(&strings).unwrap_or_else(|_| "[]".to_owned())
}

/// The distinct ids of `ids`, first occurrence kept.
fn distinct(ids: &[Uuid]) -> Vec<Uuid> {
    let mut seen = std::collections::HashSet::new();
    ids.iter().copied().filter(|id| seen.insert(*id)).collect()
}
