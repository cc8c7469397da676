//! The check types the public API creates, through `/v1/checks/<segment>` and the
//! generic `POST /v1/checks`, with the defaults of their reference create schemas
//! (`ChecksV1<Type>Create`). Adding a type to the API is one entry of [`CHECK_KINDS`].
//! A type agents run is validated by `CheckSpec::from_document`; a *stored-only* type
//! (browser, multistep, Playwright suite, agentic, traceroute, SSL and gRPC checks,
//! whose executors come later) is validated by `check_doc` and against its reference
//! schemas (`reference_schema`), stored and shown, but never scheduled or triggered
//! ([`agents_run`]). The reference has typed routes for some types only; the others
//! (no `segment`) are created through `POST /v1/checks` with their `checkType`.

use serde_json::{Map, Value, json};

use crate::model::CheckType;

/// A default value, spelled so that the table can be a constant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DefaultValue {
    Bool(bool),
    Number(i64),
    Str(&'static str),
    Null,
    EmptyList,
}

impl DefaultValue {
    pub fn to_value(self) -> Value {
        match self {
            DefaultValue::Bool(b) => Value::Bool(b),
            DefaultValue::Number(n) => json!(n),
            DefaultValue::Str(s) => json!(s),
            DefaultValue::Null => Value::Null,
            DefaultValue::EmptyList => json!([]),
        }
    }
}

/// One check type of the public API.
#[derive(Debug, Clone, Copy)]
pub struct CheckKind {
    /// Route segment: `POST /v1/checks/<segment>`, `PUT /v1/checks/<segment>/{id}`;
    /// `None` for types the reference creates through `POST /v1/checks` only.
    pub segment: Option<&'static str>,
    pub check_type: CheckType,
    /// Top-level fields of this type filled in when absent.
    pub defaults: &'static [(&'static str, DefaultValue)],
    /// Fields of `request` filled in when absent.
    pub request_defaults: &'static [(&'static str, DefaultValue)],
    /// Fields of every `request.assertions[]` item filled in when absent.
    pub assertion_defaults: &'static [(&'static str, DefaultValue)],
    /// What the type's document holds besides the common fields.
    pub body: KindBody,
    /// No executor yet: stored and validated, never run (`CheckSpec` refuses the type).
    pub stored_only: bool,
    /// Reference schema of the type's `request` on create (stored-only request types;
    /// run types are validated by `CheckSpec`).
    pub request_schema: Option<&'static str>,
    /// Reference schema the stored document of a stored-only type conforms to (what
    /// `GET /v1/checks/{id}` answers).
    pub read_schema: &'static str,
}

/// The type-specific part of a check document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindBody {
    /// A `request` object (validated by `CheckSpec`); `frequency` 0 with a
    /// `frequencyOffset` of 10, 20 or 30 seconds is allowed.
    Request,
    /// A Playwright `script` (required, non-empty) with a `runtimeId` among
    /// `/v1/runtimes`; no sub-minute frequency.
    Script,
    /// A Playwright test suite: `codeBundlePath` (required) and the suite's commands,
    /// browsers and engine as `ChecksV1PlaywrightCheck` has them; no sub-minute
    /// frequency.
    PlaywrightSuite,
    /// An agentic check: `intent` with its `goal` (required: what the agent verifies);
    /// no sub-minute frequency.
    Agentic,
}

impl KindBody {
    /// Whether `frequency` 0 (every 10, 20 or 30 seconds) is allowed.
    pub fn sub_minute(self) -> bool {
        self == KindBody::Request
    }
}

use DefaultValue::{Bool, EmptyList, Null, Number, Str};

/// Assertion defaults of the reference (`property`, `target`, and `regex` where the
/// type's assertion schema has one).
const ASSERTION_DEFAULTS: &[(&str, DefaultValue)] = &[
    ("property", Str("")),
    ("target", Str("")),
    ("regex", Str("")),
];

/// Every check type the public API creates, with its reference defaults.
pub const CHECK_KINDS: &[CheckKind] = &[
    CheckKind {
        segment: Some("url"),
        check_type: CheckType::Url,
        defaults: &[
            ("degradedResponseTime", Number(3000)),
            ("maxResponseTime", Number(5000)),
        ],
        request_defaults: &[
            ("method", Str("GET")),
            ("followRedirects", Bool(true)),
            ("skipSSL", Bool(false)),
            ("ipFamily", Str("IPv4")),
            ("assertions", EmptyList),
        ],
        assertion_defaults: &[("property", Str("")), ("target", Str(""))],
        body: KindBody::Request,
        stored_only: false,
        request_schema: None,
        read_schema: "ChecksV1UrlMonitor",
    },
    CheckKind {
        segment: Some("api"),
        check_type: CheckType::Api,
        defaults: &[
            ("degradedResponseTime", Number(5000)),
            ("maxResponseTime", Number(20000)),
        ],
        request_defaults: &[
            ("followRedirects", Bool(true)),
            ("skipSSL", Bool(false)),
            ("ipFamily", Str("IPv4")),
            ("body", Str("")),
            ("bodyType", Str("NONE")),
            ("headers", EmptyList),
            ("queryParameters", EmptyList),
            ("assertions", EmptyList),
        ],
        assertion_defaults: ASSERTION_DEFAULTS,
        body: KindBody::Request,
        stored_only: false,
        request_schema: None,
        read_schema: "ChecksV1ApiCheck",
    },
    CheckKind {
        segment: Some("tcp"),
        check_type: CheckType::Tcp,
        defaults: &[
            ("degradedResponseTime", Number(3000)),
            ("maxResponseTime", Number(5000)),
        ],
        request_defaults: &[
            ("body", Null),
            ("data", Null),
            ("ipFamily", Str("IPv4")),
            ("assertions", EmptyList),
        ],
        assertion_defaults: ASSERTION_DEFAULTS,
        body: KindBody::Request,
        stored_only: false,
        request_schema: None,
        read_schema: "ChecksV1TcpCheck",
    },
    CheckKind {
        segment: Some("dns"),
        check_type: CheckType::Dns,
        defaults: &[
            ("degradedResponseTime", Number(500)),
            ("maxResponseTime", Number(1000)),
        ],
        request_defaults: &[("protocol", Str("UDP")), ("assertions", EmptyList)],
        assertion_defaults: ASSERTION_DEFAULTS,
        body: KindBody::Request,
        stored_only: false,
        request_schema: None,
        read_schema: "ChecksV1DnsMonitor",
    },
    CheckKind {
        segment: Some("icmp"),
        check_type: CheckType::Icmp,
        defaults: &[
            ("degradedResponseTime", Number(10000)),
            ("maxResponseTime", Number(20000)),
            ("degradedPacketLossThreshold", Number(10)),
            ("maxPacketLossThreshold", Number(20)),
        ],
        request_defaults: &[
            ("ipFamily", Str("IPv4")),
            ("pingCount", Number(10)),
            ("assertions", EmptyList),
        ],
        assertion_defaults: ASSERTION_DEFAULTS,
        body: KindBody::Request,
        stored_only: false,
        request_schema: None,
        read_schema: "ChecksV1IcmpMonitor",
    },
    CheckKind {
        segment: Some("browser"),
        check_type: CheckType::Browser,
        defaults: SCRIPT_DEFAULTS,
        request_defaults: &[],
        assertion_defaults: &[],
        body: KindBody::Script,
        stored_only: true,
        request_schema: None,
        read_schema: "ChecksV1BrowserCheck",
    },
    CheckKind {
        segment: Some("multistep"),
        check_type: CheckType::MultiStep,
        defaults: SCRIPT_DEFAULTS,
        request_defaults: &[],
        assertion_defaults: &[],
        body: KindBody::Script,
        stored_only: true,
        request_schema: None,
        read_schema: "ChecksV1MultiStepCheck",
    },
    CheckKind {
        segment: None,
        check_type: CheckType::Playwright,
        defaults: &[("intent", Null), ("aiAutoRepairEnabled", Null)],
        request_defaults: &[],
        assertion_defaults: &[],
        body: KindBody::PlaywrightSuite,
        stored_only: true,
        request_schema: None,
        read_schema: "ChecksV1PlaywrightCheck",
    },
    CheckKind {
        segment: None,
        check_type: CheckType::Agentic,
        defaults: &[("aiAutoRepairEnabled", Null)],
        request_defaults: &[],
        assertion_defaults: &[],
        body: KindBody::Agentic,
        stored_only: true,
        request_schema: None,
        read_schema: "ChecksV1GenericCheck",
    },
    CheckKind {
        segment: None,
        check_type: CheckType::Traceroute,
        defaults: &[("degradedResponseTime", Null), ("maxResponseTime", Null)],
        request_defaults: &[("assertions", EmptyList)],
        assertion_defaults: ASSERTION_DEFAULTS,
        body: KindBody::Request,
        stored_only: true,
        // The reference leaves the create schema of the request undefined; its read
        // schema says what a traceroute request holds.
        request_schema: Some("ChecksV1TracerouteRequestRead"),
        read_schema: "ChecksV1TracerouteMonitor",
    },
    CheckKind {
        segment: None,
        check_type: CheckType::Ssl,
        defaults: &[("degradedResponseTime", Null), ("maxResponseTime", Null)],
        request_defaults: &[],
        assertion_defaults: &[],
        body: KindBody::Request,
        stored_only: true,
        request_schema: Some("ChecksV1SslRequest"),
        read_schema: "ChecksV1SslMonitor",
    },
    CheckKind {
        segment: None,
        check_type: CheckType::Grpc,
        defaults: &[("degradedResponseTime", Null), ("maxResponseTime", Null)],
        request_defaults: &[("assertions", EmptyList)],
        assertion_defaults: ASSERTION_DEFAULTS,
        body: KindBody::Request,
        stored_only: true,
        // As for traceroute: only the read schema of a gRPC request is defined.
        request_schema: Some("ChecksV1GrpcRequestRead"),
        read_schema: "ChecksV1GrpcMonitor",
    },
];

/// Defaults of the script types (`ChecksV1BrowserCheckCreate`,
/// `ChecksV1MultiStepCheckCreate`) beyond the fields common to every type.
const SCRIPT_DEFAULTS: &[(&str, DefaultValue)] = &[
    ("scriptPath", Null),
    ("intent", Null),
    ("aiAutoRepairEnabled", Null),
];

/// Whether agents run checks of this type: the type has an API kind that is not
/// stored-only. Heartbeat monitors are passive and never run. The scheduler and the
/// trigger create sessions only for these types, so no agent leases a job it cannot run.
pub fn agents_run(check_type: CheckType) -> bool {
    kind_of(check_type).is_some_and(|k| !k.stored_only)
}

/// The table entry of a check type, if the public API creates that type.
pub fn kind_of(check_type: CheckType) -> Option<&'static CheckKind> {
    CHECK_KINDS.iter().find(|k| k.check_type == check_type)
}

/// Fills the defaults of `kind` into a check document: top-level fields, `request`
/// fields (when `request` is an object) and assertion fields (of object items).
/// Present values, including `null`, are kept; shapes are left to validation.
pub fn fill_defaults(kind: &CheckKind, doc: &mut Map<String, Value>) {
    insert_missing(doc, kind.defaults);
    let Some(Value::Object(request)) = doc.get_mut("request") else {
        return;
    };
    insert_missing(request, kind.request_defaults);
    if let Some(Value::Array(items)) = request.get_mut("assertions") {
        for item in items.iter_mut() {
            if let Value::Object(a) = item {
                insert_missing(a, kind.assertion_defaults);
            }
        }
    }
}

fn insert_missing(map: &mut Map<String, Value>, defaults: &[(&str, DefaultValue)]) {
    for (field, value) in defaults {
        if !map.contains_key(*field) {
            map.insert((*field).to_owned(), value.to_value());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_types_are_unique() {
        for (i, a) in CHECK_KINDS.iter().enumerate() {
            for b in &CHECK_KINDS[i + 1..] {
                if a.segment.is_some() {
                    assert_ne!(a.segment, b.segment);
                }
                assert_ne!(a.check_type, b.check_type);
            }
            assert_eq!(kind_of(a.check_type).map(|k| k.segment), Some(a.segment));
            assert!(
                crate::service::reference_schema::component(a.read_schema).is_some(),
                "{}",
                a.read_schema
            );
            if let Some(schema) = a.request_schema {
                assert!(crate::service::reference_schema::component(schema).is_some());
                assert!(a.stored_only, "{schema}");
            }
        }
        assert!(kind_of(CheckType::Heartbeat).is_none());
    }

    /// A kind is stored-only exactly when `CheckSpec` has no variant for its type, so
    /// giving a type an executor (a `CheckSpec` variant) without flipping the flag, or
    /// the reverse, fails here.
    #[test]
    fn stored_only_matches_what_check_spec_knows() {
        for kind in CHECK_KINDS {
            let refused = matches!(
                crate::model::CheckSpec::from_document(&json!({"checkType": kind.check_type.as_str()})),
                Err(e) if e.field == "checkType"
            );
            assert_eq!(kind.stored_only, refused, "{}", kind.check_type);
            assert_eq!(agents_run(kind.check_type), !refused);
        }
        assert!(!agents_run(CheckType::Heartbeat));
        assert!(!agents_run(CheckType::Browser));
        assert!(agents_run(CheckType::Url));
    }

    #[test]
    fn defaults_fill_only_missing_fields() {
        let Some(kind) = kind_of(CheckType::Dns) else {
            panic!("no DNS kind")
        };
        let mut doc = json!({"maxResponseTime": null, "request": {"protocol": "TCP",
            "assertions": [{"source": "RESPONSE_CODE"}, 5]}});
        let Value::Object(map) = &mut doc else {
            panic!("not an object")
        };
        fill_defaults(kind, map);
        assert_eq!(doc["degradedResponseTime"], 500);
        assert_eq!(doc["maxResponseTime"], Value::Null);
        assert_eq!(doc["request"]["protocol"], "TCP");
        assert_eq!(doc["request"]["assertions"][0]["target"], "");
        assert_eq!(doc["request"]["assertions"][1], 5);
    }
}
