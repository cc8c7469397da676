//! Status pages in a real headless Chromium (Debian's `/usr/bin/chromium`) driven by
//! playwright-core (npm, installed on first use into `<target>/tmp/browser-tools`; no
//! browser is downloaded): a public page and a private one, each in the light and the
//! dark color scheme, asserting on what a visitor sees (text, computed colors) and
//! saving screenshots under `<target>/screenshots/`.

mod require_support;
mod service_support;
mod status_html_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use serde_json::{Value, json};

use outpost::model::RunStatus;
use service_support::TestService;
use status_html_support::{
    card, incident, linked_check_with_result, page, page_key, service, theme,
};

const CHROMIUM: &str = "/usr/bin/chromium";

static INSTALL: Mutex<()> = Mutex::new(());

/// The directory holding `node_modules/playwright-core`, installing it if needed; None
/// after a SKIP line when that is not possible.
fn playwright_dir() -> Option<PathBuf> {
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-tools");
    if dir
        .join("node_modules/playwright-core/package.json")
        .exists()
    {
        return Some(dir);
    }
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(&dir)
        .arg("playwright-core")
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => Some(dir),
        Ok(o) => {
            require_support::skip(&format!(
                "npm install playwright-core failed: {}",
                String::from_utf8_lossy(&o.stderr)
            ));
            None
        }
        Err(e) => {
            require_support::skip(&format!("npm is not available ({e})"));
            None
        }
    }
}

/// Opens the pages in both color schemes and reports what the visitor sees as JSON.
const SCRIPT: &str = r#"
const { chromium } = require(process.env.PW_DIR + '/node_modules/playwright-core');
const cfg = JSON.parse(process.env.SCENARIO);
(async () => {
  const browser = await chromium.launch({
    executablePath: cfg.chromium, headless: true, args: ['--no-sandbox'],
  });
  const bg = (p) => p.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const out = {};
  for (const scheme of ['light', 'dark']) {
    const context = await browser.newContext({ colorScheme: scheme, viewport: { width: 1000, height: 900 } });
    const tab = await context.newPage();
    const seen = {};
    let resp = await tab.goto(cfg.base + cfg.public);
    seen.publicStatus = resp.status();
    seen.title = await tab.title();
    seen.banner = await tab.locator('.banner').innerText();
    seen.services = await tab.locator('#services li').allInnerTexts();
    seen.active = await tab.locator('#active-incidents').innerText();
    seen.publicBg = await bg(tab);
    seen.scripts = await tab.locator('script').count();
    await tab.screenshot({ path: `${cfg.shots}/public-${scheme}.png`, fullPage: true });

    resp = await tab.goto(cfg.base + cfg.fixedDark);
    seen.fixedDarkBg = await bg(tab);

    resp = await tab.goto(cfg.base + cfg.private);
    seen.lockedStatus = resp.status();
    seen.lockedText = await tab.locator('body').innerText();
    await tab.screenshot({ path: `${cfg.shots}/private-locked-${scheme}.png`, fullPage: true });
    await tab.fill('input[name=key]', cfg.key);
    await Promise.all([
      tab.waitForURL(cfg.base + cfg.private),
      tab.click('button[type=submit]'),
    ]);
    seen.unlockedUrl = tab.url();
    seen.unlockedText = await tab.locator('body').innerText();
    seen.cookies = await context.cookies();
    await tab.screenshot({ path: `${cfg.shots}/private-${scheme}.png`, fullPage: true });
    out[scheme] = seen;
    await context.close();
  }
  await browser.close();
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
"#;

fn rgb(hex: &str) -> String {
    let n = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap();
    format!("rgb({}, {}, {})", n(1), n(3), n(5))
}

#[tokio::test]
async fn visitors_see_public_and_private_pages_in_light_and_dark() {
    if !Path::new(CHROMIUM).exists() {
        require_support::skip(&format!("{CHROMIUM} is missing (apt-get install chromium)"));
        return;
    }
    let Some(pw) = playwright_dir() else { return };
    let svc = TestService::start().await;
    let api = service(&svc, "Public API").await;
    let web = service(&svc, "Website").await;
    let search = service(&svc, "Search").await;
    linked_check_with_result(&svc, &api, RunStatus::Passed).await;
    linked_check_with_result(&svc, &web, RunStatus::Passed).await;
    linked_check_with_result(&svc, &search, RunStatus::Failed).await;
    let (light_bg, dark_bg) = ("#EEF2F7", "#0B1220");
    page(
        &svc,
        json!({"name": "Acme status", "url": "acme", "description": "Live state of Acme's services",
               "themeColors": theme(light_bg, dark_bg),
               "cards": [card("Core", &[&api, &web]), card("Extras", &[&search])]}),
    )
    .await;
    incident(
        &svc,
        "Search results are stale",
        &[&search],
        "MAJOR",
        json!({"description": "The indexer stopped; restarting it", "status": "IDENTIFIED"}),
    )
    .await;
    page(
        &svc,
        json!({"name": "Always dark", "url": "night", "defaultTheme": "DARK",
               "themeColors": theme(light_bg, dark_bg), "cards": [card("Core", &[&api])]}),
    )
    .await;
    let private = page(
        &svc,
        json!({"name": "Team status", "url": "team", "isPrivate": true,
               "themeColors": theme(light_bg, dark_bg),
               "cards": [card("Internal", &[&api])]}),
    )
    .await;
    let (_, key) = page_key(&svc, &private).await;

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let script = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status_pages_browser.js");
    std::fs::write(&script, SCRIPT).unwrap();
    let scenario = json!({
        "chromium": CHROMIUM, "base": svc.base, "public": "/status/acme",
        "fixedDark": "/status/night", "private": "/status/team", "key": key,
        "shots": shots,
    });
    // Blocking work off the runtime, so the in-process service keeps answering.
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(&script)
            .env("PW_DIR", &pw)
            .env("SCENARIO", scenario.to_string())
            .stdin(Stdio::null())
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(
        out.status.success(),
        "browser run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();

    for scheme in ["light", "dark"] {
        let s = &seen[scheme];
        assert_eq!(s["publicStatus"], 200, "{scheme}: {s}");
        assert_eq!(s["title"], "Acme status");
        assert_eq!(s["scripts"], 0);
        assert!(
            s["banner"]
                .as_str()
                .unwrap()
                .contains("Some services are down"),
            "{s}"
        );
        let services: Vec<String> = s["services"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                v.as_str()
                    .unwrap()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        assert_eq!(
            services,
            [
                "Public API Operational",
                "Website Operational",
                "Search Down"
            ],
            "{scheme}"
        );
        let active = s["active"].as_str().unwrap();
        assert!(active.contains("Search results are stale"), "{active}");
        assert!(
            active.contains("The indexer stopped; restarting it"),
            "{active}"
        );
        assert_eq!(
            s["fixedDarkBg"],
            rgb(dark_bg),
            "DARK pages stay dark in {scheme}"
        );

        assert_eq!(s["lockedStatus"], 401, "{scheme}");
        let locked = s["lockedText"].as_str().unwrap();
        assert!(locked.contains("This status page is private"), "{locked}");
        for secret in ["Team status", "Public API", "Internal"] {
            assert!(!locked.contains(secret), "{secret} leaked: {locked}");
        }
        assert!(
            s["unlockedUrl"].as_str().unwrap().ends_with("/status/team"),
            "{s}"
        );
        let unlocked = s["unlockedText"].as_str().unwrap();
        assert!(
            unlocked.contains("Internal") && unlocked.contains("Public API"),
            "{unlocked}"
        );
        let cookies = s["cookies"].as_array().unwrap();
        assert_eq!(cookies.len(), 1, "{cookies:?}");
        assert_eq!(cookies[0]["httpOnly"], true);
        assert_eq!(cookies[0]["sameSite"], "Lax");
        assert_eq!(cookies[0]["path"], "/status/team");
    }
    assert_eq!(seen["light"]["publicBg"], rgb(light_bg));
    assert_eq!(seen["dark"]["publicBg"], rgb(dark_bg));
    assert_ne!(seen["light"]["publicBg"], seen["dark"]["publicBg"]);
    for name in [
        "public-light",
        "public-dark",
        "private-light",
        "private-locked-dark",
    ] {
        let shot = shots.join(format!("{name}.png"));
        let bytes = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
        assert!(bytes > 1000, "{} missing or empty", shot.display());
    }
    svc.stop().await;
}
