//! What a page's accessibility tree says, as plain data: the snapshot the
//! browser layer takes (each kept node with a stable ref) and a search over
//! it that needs no model.

use serde::{Deserialize, Serialize};

/// One node of an [`AxSnapshot`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AxNode {
    /// The stable ref (`@e3`).
    #[serde(rename = "ref")]
    pub reference: String,
    /// The ARIA role (`button`, `link`, `textbox`, `heading`).
    pub role: String,
    /// The accessible name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The current value (text fields, sliders), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Nesting depth among the kept nodes (0 for the root).
    pub depth: u32,
    /// Whether the node can be focused.
    #[serde(default)]
    pub focusable: bool,
}

/// The accessibility tree of the driven tab, flattened in document order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AxSnapshot {
    /// The page's URL when taken.
    pub url: String,
    /// The kept nodes in document order.
    pub nodes: Vec<AxNode>,
}

impl AxSnapshot {
    /// The ref of the note node that ends a snapshot cut at a cap (it says
    /// how many nodes were left out).
    pub const OMITTED_REF: &'static str = "@omitted";

    /// An indented text outline, one node per line:
    /// `  - button "Submit" [@e7]`.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            out.push_str(&n.line(0));
            out.push('\n');
        }
        out
    }

    /// The first node with this role whose name contains `name`.
    pub fn find(&self, role: &str, name: &str) -> Option<&AxNode> {
        self.nodes
            .iter()
            .find(|n| n.role == role && n.name.contains(name))
    }
}

impl AxNode {
    /// The node as a line of an outline, indented by its depth below
    /// `base_depth`: `  - button "Submit" = "x" [@e7]`.
    pub fn line(&self, base_depth: u32) -> String {
        let mut line = "  ".repeat(self.depth.saturating_sub(base_depth) as usize);
        line.push_str("- ");
        line.push_str(&self.role);
        if !self.name.is_empty() {
            line.push_str(&format!(" {:?}", self.name));
        }
        if let Some(v) = &self.value {
            line.push_str(&format!(" = {v:?}"));
        }
        line.push_str(&format!(" [{}]", self.reference));
        line
    }

    /// Whether a person acts on it (a button, link, field, option…).
    pub fn is_interactive(&self) -> bool {
        self.focusable || INTERACTIVE.contains(&self.role.as_str())
    }
}

/// Roles a person acts on: they rank first in a search.
const INTERACTIVE: &[&str] = &[
    "button",
    "link",
    "textbox",
    "searchbox",
    "combobox",
    "checkbox",
    "radio",
    "switch",
    "slider",
    "spinbutton",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "option",
    "tab",
    "treeitem",
    "listbox",
];

impl AxSnapshot {
    /// The nodes best matching a natural-language `query` ("the email
    /// field", "submit button"), best first, at most `limit`: words of the
    /// query found in a node's name, value or role score, whole-name
    /// matches and interactive roles more. No model call. Nodes that match
    /// no word are left out.
    pub fn search(&self, query: &str, limit: usize) -> Vec<&AxNode> {
        let words: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 1 && !STOP_WORDS.contains(&w.to_lowercase().as_str()))
            .map(str::to_lowercase)
            .collect();
        if words.is_empty() {
            return Vec::new();
        }
        let whole = query.trim().to_lowercase();
        // (by name or value, by role) per node.
        let scores: Vec<(u32, u32)> = self
            .nodes
            .iter()
            .map(|node| {
                let name = node.name.to_lowercase();
                let value = node.value.as_deref().unwrap_or("").to_lowercase();
                let role = node.role.to_lowercase();
                let (mut by_name, mut by_role) = (0, 0);
                for w in &words {
                    if name.split(|c: char| !c.is_alphanumeric()).any(|n| n == w) {
                        by_name += 4;
                    } else if name.contains(w.as_str()) {
                        by_name += 2;
                    }
                    if value.contains(w.as_str()) {
                        by_name += 1;
                    }
                    let field = matches!(role.as_str(), "textbox" | "searchbox" | "combobox");
                    if role == *w || (w == "field" && field) {
                        by_role += 3;
                    }
                }
                if by_name > 0 && !name.is_empty() && whole.contains(&name) {
                    by_name += 3;
                }
                (by_name, by_role)
            })
            .collect();
        // When some name matches, the role alone does not qualify a node
        // ("the email field" is not every field).
        let names_match = scores.iter().any(|(n, _)| *n > 0);
        let mut scored: Vec<(u32, usize, &AxNode)> = self
            .nodes
            .iter()
            .zip(&scores)
            .enumerate()
            .filter(|(_, (_, (by_name, by_role)))| {
                if names_match {
                    *by_name > 0
                } else {
                    *by_role > 0
                }
            })
            .map(|(i, (node, (by_name, by_role)))| {
                let bonus = if node.is_interactive() { 2 } else { 0 };
                (by_name + by_role + bonus, i, node)
            })
            .collect();
        // Best score first; document order among equals.
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().take(limit).map(|(_, _, n)| n).collect()
    }
}

/// Words that say nothing about which element is meant.
const STOP_WORDS: &[&str] = &[
    "the", "a", "an", "to", "of", "on", "in", "for", "and", "or", "with", "at", "this", "that",
    "is",
];
