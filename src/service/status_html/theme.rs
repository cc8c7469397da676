//! The page's colors as CSS custom properties: `themeColors.light` and `.dark` (or the
//! built-in palettes), chosen by `defaultTheme`: LIGHT or DARK fixed, AUTO following the
//! browser's `prefers-color-scheme`.

use std::fmt::Write;

use serde_json::{Map, Value};

use super::escape::safe_color;

/// Theme color names with their CSS variable and the built-in light and dark values.
const COLORS: [(&str, &str, &str, &str); 12] = [
    ("bodyBackgroundColor", "--body-bg", "#F7F8FA", "#0F1115"),
    ("headerBackgroundColor", "--header-bg", "#FFFFFF", "#171A21"),
    ("headerFontColor", "--header-fg", "#111827", "#F3F4F6"),
    ("titleFontColor", "--title-fg", "#111827", "#F9FAFB"),
    ("bodyFontColor", "--body-fg", "#1F2937", "#E5E7EB"),
    ("bodyFontColorMuted", "--muted-fg", "#6B7280", "#9CA3AF"),
    ("navigationFontColor", "--nav-fg", "#374151", "#D1D5DB"),
    ("linkFontColor", "--link-fg", "#2563EB", "#60A5FA"),
    ("cardBackgroundColor", "--card-bg", "#FFFFFF", "#1B1F27"),
    ("borderColor", "--border", "#E5E7EB", "#2D333F"),
    (
        "primaryButtonBackgroundColor",
        "--button-bg",
        "#2563EB",
        "#3B82F6",
    ),
    (
        "primaryButtonFontColor",
        "--button-fg",
        "#FFFFFF",
        "#FFFFFF",
    ),
];

/// The theme a page asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultTheme {
    Light,
    Dark,
    Auto,
}

impl DefaultTheme {
    pub fn of(settings: &Map<String, Value>) -> DefaultTheme {
        match settings.get("defaultTheme").and_then(Value::as_str) {
            Some("LIGHT") => DefaultTheme::Light,
            Some("DARK") => DefaultTheme::Dark,
            _ => DefaultTheme::Auto,
        }
    }
}

/// `name: value;` for each color of one side (`light`/`dark`), user colors when valid.
fn declarations(settings: &Map<String, Value>, dark: bool) -> String {
    let side = settings
        .get("themeColors")
        .and_then(|t| t.get(if dark { "dark" } else { "light" }));
    let mut out = String::new();
    for (name, var, light_default, dark_default) in COLORS {
        let fallback = if dark { dark_default } else { light_default };
        let color = side
            .and_then(|s| s.get(name))
            .and_then(Value::as_str)
            .and_then(safe_color)
            .unwrap_or(fallback);
        let _ = write!(out, "{var}:{color};");
    }
    out
}

/// The `:root` rules of the page's theme.
pub fn root_css(settings: &Map<String, Value>) -> String {
    let light = declarations(settings, false);
    let dark = declarations(settings, true);
    match DefaultTheme::of(settings) {
        DefaultTheme::Light => format!(":root{{color-scheme:light;{light}}}"),
        DefaultTheme::Dark => format!(":root{{color-scheme:dark;{dark}}}"),
        DefaultTheme::Auto => format!(
            ":root{{color-scheme:light dark;{light}}}\
             @media (prefers-color-scheme: dark){{:root{{{dark}}}}}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn auto_follows_the_browser_and_fixed_themes_do_not() {
        let mut colors = Map::new();
        for (name, ..) in COLORS {
            colors.insert(name.into(), json!("#ABCDEF"));
        }
        let auto = root_css(&settings(json!({
            "themeColors": {"light": colors.clone(), "dark": {"bodyBackgroundColor": "#000000"}},
        })));
        assert!(auto.contains("prefers-color-scheme: dark"), "{auto}");
        assert!(auto.contains("--body-bg:#ABCDEF;"), "{auto}");
        assert!(auto.contains("--body-bg:#000000;"), "{auto}");
        let light = root_css(&settings(json!({"defaultTheme": "LIGHT"})));
        assert!(!light.contains("prefers-color-scheme"), "{light}");
        assert!(light.contains("--body-bg:#F7F8FA;"), "{light}");
        let dark = root_css(&settings(json!({"defaultTheme": "DARK"})));
        assert!(dark.contains("--body-bg:#0F1115;"), "{dark}");
        let hostile = root_css(&settings(json!({
            "themeColors": {"light": {"bodyBackgroundColor": "red}body{display:none"}},
        })));
        assert!(!hostile.contains("display:none"), "{hostile}");
    }
}
