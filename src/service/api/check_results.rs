//! `/v1/check-results`: one stored result, or a filtered page of a check's results, in
//! the reference `CheckResult` shape. Assets of a result are in `result_assets`.

use crate::service::api::routes::{Area, Routes};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde_json::{Map, Value, json};

use super::extract::{Paging, parse_id};
use super::result_assets;
use crate::model::{CheckType, ResultType};
use crate::service::auth::ApiAuth;
use crate::service::context::AppState;
use crate::service::errors::ApiError;
use crate::service::sessions::result_link;
use crate::service::store::{ResultFilter, ResultRecord, now_ms};

pub fn routes() -> Routes {
    Routes::new(Area::Public)
        .get("/v1/check-results/{check_id}", list)
        .get("/v1/check-results/{check_id}/{result_id}", get_one)
        .merge(result_assets::routes())
}

/// A result as the API shows it: the agent's RunResult fields (timingPhases, response,
/// assertions, error, ...) with the reference `CheckResult` fields on top, and for URL
/// and API checks the reference `apiCheckResult`.
pub fn result_json(public_url: &str, r: &ResultRecord) -> Value {
    let mut out = match &r.result {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    let api_result = matches!(r.check_type, CheckType::Url | CheckType::Api)
        .then(|| api_check_result(public_url, r, &out));
    let fields = [
        ("id", json!(r.id)),
        (
            "checkResultLink",
            json!(result_link(public_url, r.check_id, r.id)),
        ),
        ("name", json!(r.name)),
        ("checkId", json!(r.check_id)),
        ("checkSessionId", json!(r.session_id)),
        ("checkType", json!(r.check_type)),
        ("status", json!(r.status)),
        ("hasFailures", json!(r.has_failures)),
        ("hasErrors", json!(r.has_errors)),
        ("isDegraded", json!(r.is_degraded)),
        ("isCancelled", json!(r.is_cancelled)),
        ("aborted", json!(r.aborted)),
        ("overMaxResponseTime", json!(r.over_max_response_time)),
        ("runLocation", json!(r.run_location)),
        ("startedAt", json!(r.started_at)),
        ("stoppedAt", json!(r.stopped_at)),
        ("created_at", json!(r.created_at)),
        ("responseTime", json!(response_time(r))),
        ("attempts", json!(r.attempts)),
        ("resultType", json!(r.result_type)),
        ("sequenceId", Value::Null),
        ("traceId", Value::Null),
        ("errorGroupIds", json!([])),
    ];
    for (k, v) in fields {
        out.insert(k.to_owned(), v);
    }
    if let Some(api) = api_result {
        out.insert("apiCheckResult".into(), api);
    }
    Value::Object(out)
}

/// `responseTime` is a number in the reference: the measured time, else the run's
/// wall-clock duration, else 0.
fn response_time(r: &ResultRecord) -> f64 {
    r.response_time
        .or_else(|| match (r.started_at, r.stopped_at) {
            (Some(a), Some(b)) => Some((b - a).num_milliseconds().max(0) as f64),
            _ => None,
        })
        .unwrap_or(0.0)
}

/// The reference `CheckResultAPI` built from the stored RunResult: the request sent,
/// the response (status, headers, body, timings), the assertions, the error, and the
/// download URL of the packet capture when the network diagnostics made one.
fn api_check_result(public_url: &str, r: &ResultRecord, run: &Map<String, Value>) -> Value {
    let mut request = Map::new();
    if let Some(Value::Object(sent)) = run.get("request") {
        for (from, to) in [("method", "method"), ("url", "url"), ("body", "data")] {
            if let Some(v @ Value::String(_)) = sent.get(from) {
                request.insert(to.into(), v.clone());
            }
        }
        if let Some(h @ Value::Object(_)) = sent.get("headers") {
            request.insert("headers".into(), h.clone());
        }
        request.insert("params".into(), json!({}));
    }
    let mut response = Map::new();
    if let Some(Value::Object(got)) = run.get("response") {
        for (from, to) in [
            ("status", "status"),
            ("statusText", "statusText"),
            ("body", "body"),
        ] {
            if let Some(v @ (Value::String(_) | Value::Number(_))) = got.get(from) {
                response.insert(to.into(), v.clone());
            }
        }
        if let Some(h @ Value::Object(_)) = got.get("headers") {
            response.insert("headers".into(), h.clone());
        }
    }
    if let Some(t @ Value::Object(_)) = run.get("timingPhases") {
        response.insert("timingPhases".into(), t.clone());
        response.insert("timings".into(), t.clone());
    }
    let assertions = match run.get("assertions") {
        Some(a @ Value::Array(_)) => a.clone(),
        _ => json!([]),
    };
    let request_error = run
        .get("error")
        .and_then(|e| e.get("message"))
        .cloned()
        .unwrap_or(Value::Null);
    let artifact_names: Vec<&str> = run
        .get("artifacts")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.get("name").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    let pcap = artifact_names
        .iter()
        .find(|n| result_assets::asset_type(n) == "pcap")
        .map(|n| json!(result_assets::asset_url(public_url, r, n)))
        .unwrap_or(Value::Null);
    let job_assets: Vec<Value> = artifact_names
        .iter()
        .map(|n| json!(result_assets::asset_url(public_url, r, n)))
        .collect();
    json!({
        "assertions": assertions,
        "request": request,
        "response": response,
        "requestError": request_error,
        "jobLog": Value::Null,
        "jobAssets": job_assets,
        "pcapDataUrl": pcap,
    })
}

async fn get_one(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path((check_id, result_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let check_id = parse_id(&check_id, "checkId")?;
    let result_id = parse_id(&result_id, "checkResultId")?;
    match ctx
        .store
        .get_result(auth.account_id, check_id, result_id)
        .await?
    {
        Some(r) => Ok(Json(result_json(&ctx.public_url, &r))),
        None => Err(ApiError::not_found("No such check result.")),
    }
}

/// Longest window of a listing, and its default (reference: six hours).
pub const WINDOW_MS: i64 = 6 * 3600 * 1000;
/// Latest accepted `from`/`to`: the end of year 9999, in seconds.
const MAX_TIMESTAMP_SECS: f64 = 253_402_300_799.0;
/// Longest `location` filter (a slug name).
const MAX_LOCATION_LEN: usize = 255;

/// The query of `GET /v1/check-results/{checkId}`: `limit`, `page`, `from` and `to`
/// (UNIX seconds; at most six hours apart, by default the six hours before now, or
/// six hours from the one given), `location`, `checkType`, `hasFailures`,
/// `resultType` (FINAL by default, ATTEMPT or ALL). Unknown parameters are ignored;
/// a bad value is a 400 naming the parameter.
#[derive(Debug, PartialEq)]
pub struct ResultsQuery {
    pub limit: i64,
    pub offset: i64,
    pub filter: ResultFilter,
}

impl ResultsQuery {
    pub fn parse(raw: Option<&str>, now_ms: i64) -> Result<ResultsQuery, ApiError> {
        let mut paging = Paging::default();
        let (mut from, mut to) = (None, None);
        let mut location = None;
        let mut check_type = None;
        let mut has_failures = None;
        let mut result_type = Some(ResultType::Final);
        for (key, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            match key.as_ref() {
                "limit" => paging.limit = Some(integer("limit", &value)?),
                "page" => paging.page = Some(integer("page", &value)?),
                "from" => from = Some(timestamp_ms("from", &value)?),
                "to" => to = Some(timestamp_ms("to", &value)?),
                "location" => {
                    if value.is_empty() || value.len() > MAX_LOCATION_LEN {
                        return Err(ApiError::invalid(
                            "location",
                            format!("must be 1 to {MAX_LOCATION_LEN} bytes"),
                        ));
                    }
                    location = Some(value.into_owned());
                }
                "checkType" => match CheckType::parse(&value) {
                    Some(t) => check_type = Some(t),
                    None => {
                        return Err(ApiError::invalid(
                            "checkType",
                            format!("unknown check type {:?}", value.as_ref()),
                        ));
                    }
                },
                "hasFailures" => {
                    has_failures = Some(match value.as_ref() {
                        "true" => true,
                        "false" => false,
                        _ => return Err(ApiError::invalid("hasFailures", "must be true or false")),
                    })
                }
                "resultType" => {
                    result_type = match value.as_ref() {
                        "FINAL" => Some(ResultType::Final),
                        "ATTEMPT" => Some(ResultType::Attempt),
                        "ALL" => None,
                        _ => {
                            return Err(ApiError::invalid(
                                "resultType",
                                "must be FINAL, ATTEMPT or ALL",
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        let (from_ms, to_ms) = match (from, to) {
            (None, None) => (now_ms - WINDOW_MS, now_ms),
            (Some(f), None) => (f, f + WINDOW_MS),
            (None, Some(t)) => (t - WINDOW_MS, t),
            (Some(f), Some(t)) => {
                if t <= f {
                    return Err(ApiError::invalid("to", "must be after from"));
                }
                if t - f > WINDOW_MS {
                    return Err(ApiError::invalid(
                        "to",
                        "must be at most six hours after from",
                    ));
                }
                (f, t)
            }
        };
        let (limit, offset) = paging.resolve()?;
        Ok(ResultsQuery {
            limit,
            offset,
            filter: ResultFilter {
                from_ms,
                to_ms,
                location,
                has_failures,
                result_type,
                check_type,
            },
        })
    }
}

fn integer(field: &str, value: &str) -> Result<i64, ApiError> {
    value
        .trim()
        .parse()
        .map_err(|_| ApiError::invalid(field, "must be an integer"))
}

/// A UNIX timestamp in seconds (fractions allowed), as milliseconds.
fn timestamp_ms(field: &str, value: &str) -> Result<i64, ApiError> {
    match value.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && (0.0..=MAX_TIMESTAMP_SECS).contains(&secs) => {
            // In range, so the product fits an i64.
            Ok((secs * 1000.0).round() as i64)
        }
        _ => Err(ApiError::invalid(
            field,
            "must be a UNIX timestamp in seconds",
        )),
    }
}

async fn list(
    State(ctx): State<AppState>,
    auth: ApiAuth,
    Path(check_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let check_id = parse_id(&check_id, "checkId")?;
    let query = ResultsQuery::parse(raw.as_deref(), now_ms())?;
    if ctx
        .store
        .get_check(auth.account_id, check_id)
        .await?
        .is_none()
    {
        return Err(ApiError::not_found("No such check."));
    }
    let results = ctx
        .store
        .list_results(
            auth.account_id,
            check_id,
            &query.filter,
            query.limit,
            query.offset,
        )
        .await?;
    Ok(Json(Value::Array(
        results
            .iter()
            .map(|r| result_json(&ctx.public_url, r))
            .collect(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    fn parse(q: &str) -> Result<ResultsQuery, String> {
        ResultsQuery::parse(Some(q), NOW).map_err(|e| e.message)
    }

    #[test]
    fn defaults_are_the_last_six_hours_of_final_results() {
        let q = parse("").unwrap();
        assert_eq!((q.limit, q.offset), (10, 0));
        let f = q.filter;
        assert_eq!((f.from_ms, f.to_ms), (NOW - WINDOW_MS, NOW));
        assert_eq!(f.result_type, Some(ResultType::Final));
        assert_eq!(
            (f.location, f.has_failures, f.check_type),
            (None, None, None)
        );
    }

    #[test]
    fn windows_follow_the_reference() {
        let f = parse("from=1000").unwrap().filter;
        assert_eq!((f.from_ms, f.to_ms), (1_000_000, 1_000_000 + WINDOW_MS));
        let f = parse("to=100000.5").unwrap().filter;
        assert_eq!((f.from_ms, f.to_ms), (100_000_500 - WINDOW_MS, 100_000_500));
        let f = parse("from=1000&to=4600").unwrap().filter;
        assert_eq!((f.from_ms, f.to_ms), (1_000_000, 4_600_000));
        assert!(parse("from=1000&to=1000").unwrap_err().starts_with("to:"));
        assert!(parse("from=0&to=21601").unwrap_err().starts_with("to:"));
        for bad in [
            "from=x", "from=-1", "from=NaN", "to=inf", "to=1e300", "from=",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn filters_and_their_errors() {
        let q = parse(
            "limit=100&page=3&location=local&checkType=API&hasFailures=true&resultType=ALL&x=1",
        )
        .unwrap();
        assert_eq!((q.limit, q.offset), (100, 200));
        let f = q.filter;
        assert_eq!(f.location.as_deref(), Some("local"));
        assert_eq!(f.check_type, Some(CheckType::Api));
        assert_eq!(f.has_failures, Some(true));
        assert_eq!(f.result_type, None);
        assert_eq!(
            parse("resultType=ATTEMPT").unwrap().filter.result_type,
            Some(ResultType::Attempt)
        );
        assert_eq!(
            parse("checkType=SSL").unwrap().filter.check_type,
            Some(CheckType::Ssl)
        );
        for (bad, field) in [
            ("limit=0", "limit"),
            ("limit=101", "limit"),
            ("limit=ten", "limit"),
            ("page=0", "page"),
            ("page=1.5", "page"),
            ("checkType=SMOKE", "checkType"),
            ("hasFailures=yes", "hasFailures"),
            ("resultType=SOME", "resultType"),
            ("location=", "location"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("{field}:")), "{bad}: {e}");
        }
    }
}
