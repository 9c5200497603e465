//! `firewall_rule`: a Windows Firewall rule (e.g. UDP 4789 in for VXLAN, TCP 10250 in for
//! the kubelet).
//!
//! Parameters: `name` (unique rule name), `protocol` = "TCP" | "UDP", `local_port` (number or
//! "from-to"), `direction` = "in" (default) | "out", `action` = "allow" (default) | "block",
//! `state` = "present" (default) | "absent".
//! No-op when a rule of that name exists, enabled, with the same direction, action, protocol
//! and port. Changes: removes a differing rule and creates it anew (`New-NetFirewallRule`).
//!
//! ```toml
//! [[tasks]]
//! name = "fw-vxlan"
//! module = "firewall_rule"
//! on = { os = "windows" }
//! params = { name = "kwin-vxlan", protocol = "UDP", local_port = 4789 }
//! ```

use super::facts::{FirewallRuleFact, FirewallRuleState};
use super::{ps_wildcard_literal, step, State};
use crate::table::{Described, FactSample};
use kwin_engine::fact::{FactQuery, Facts};
use kwin_engine::module::{Action, Change, Ctx, Module, ModuleError, ParamError, Plan, Touches};
use kwin_engine::quote::ps_quote;
use kwin_engine::transport::Shell;
use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Direction {
    In,
    Out,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum RuleAction {
    Allow,
    Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
enum Protocol {
    Tcp,
    Udp,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum Port {
    One(u16),
    Text(String),
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FirewallRuleParams {
    /// The rule's unique name (the rule kwin owns: a differing rule of that name is
    /// replaced).
    name: String,
    /// `TCP` or `UDP`; required when `state` is `present`.
    protocol: Option<Protocol>,
    /// A port (`4789`) or a range (`"10250-10260"`); required when `state` is `present`.
    local_port: Option<Port>,
    /// `in` (default) or `out`.
    direction: Option<Direction>,
    /// `allow` (default) or `block`.
    action: Option<RuleAction>,
    /// `present` (default) or `absent`.
    #[serde(default)]
    state: State,
}

#[derive(Debug, Clone)]
pub struct FirewallRule {
    name: String,
    protocol: Protocol,
    port: String,
    direction: Direction,
    action: RuleAction,
    state: State,
}

fn parse_port(p: &Port) -> Result<String, ParamError> {
    match p {
        Port::One(n) if *n > 0 => Ok(n.to_string()),
        Port::One(_) => Err(ParamError::at("local_port", "port 0 is not a port")),
        Port::Text(s) => {
            let ok = match s.split_once('-') {
                Some((a, b)) => {
                    matches!((a.parse::<u16>(), b.parse::<u16>()), (Ok(x), Ok(y)) if x > 0 && x <= y)
                }
                None => s.parse::<u16>().is_ok_and(|n| n > 0),
            };
            if ok {
                Ok(s.clone())
            } else {
                Err(ParamError::at(
                    "local_port",
                    format!("`{s}` is not a port or a range like 8000-8100"),
                ))
            }
        }
    }
}

impl Described for FirewallRule {
    const NAME: &'static str = "firewall_rule";
    const DOC: &'static str = "a Windows firewall rule present with the given settings, or absent";
    type Params = FirewallRuleParams;

    fn from_params(p: FirewallRuleParams, _shell: Shell) -> Result<Self, ParamError> {
        if p.name.is_empty() || p.name.contains(['\n', '\r', '\0']) {
            return Err(ParamError::at(
                "name",
                "a rule name must be one non-empty line",
            ));
        }
        let (protocol, port) = match (p.state, p.protocol, &p.local_port) {
            (State::Present, Some(pr), Some(lp)) => (pr, parse_port(lp)?),
            (State::Present, None, _) => {
                return Err(ParamError::at(
                    "protocol",
                    "`protocol` (TCP or UDP) is required",
                ))
            }
            (State::Present, _, None) => {
                return Err(ParamError::at("local_port", "`local_port` is required"))
            }
            (State::Absent, pr, lp) => (
                pr.unwrap_or(Protocol::Tcp),
                lp.as_ref().map(parse_port).transpose()?.unwrap_or_default(),
            ),
        };
        Ok(FirewallRule {
            name: p.name,
            protocol,
            port,
            direction: p.direction.unwrap_or(Direction::In),
            action: p.action.unwrap_or(RuleAction::Allow),
            state: p.state,
        })
    }

    fn fact_samples() -> Vec<FactSample> {
        vec![FactSample::windows(FirewallRuleFact { name: "r".into() })]
    }
}

impl FirewallRule {
    fn fact(&self) -> FirewallRuleFact {
        FirewallRuleFact {
            name: self.name.clone(),
        }
    }
    fn desired(&self) -> (&'static str, &'static str, &'static str) {
        (
            match self.direction {
                Direction::In => "Inbound",
                Direction::Out => "Outbound",
            },
            match self.action {
                RuleAction::Allow => "Allow",
                RuleAction::Block => "Block",
            },
            match self.protocol {
                Protocol::Tcp => "TCP",
                Protocol::Udp => "UDP",
            },
        )
    }
}

impl Module for FirewallRule {
    fn facts(&self, shell: Shell) -> Vec<FactQuery> {
        vec![FactQuery::of(&self.fact(), shell)]
    }
    fn reads(&self) -> Vec<String> {
        vec![format!("firewall:{}", self.name)]
    }
    fn plan(&self, facts: &Facts, _ctx: &Ctx<'_>) -> Result<Plan, ModuleError> {
        let st: FirewallRuleState = facts.get(&self.fact())?;
        let touches = Touches::Resources(vec![format!("firewall:{}", self.name)]);
        let n = ps_quote(&self.name);
        let (dir, act, proto) = self.desired();
        let have = format!(
            "{} {} {} {} enabled={}",
            st.direction, st.action, st.protocol, st.local_port, st.enabled
        );
        let want = format!("{dir} {act} {proto} {} enabled=True", self.port);
        match self.state {
            State::Present => {
                if st.exists
                    && st.enabled == "True"
                    && st.direction == dir
                    && st.action == act
                    && st.protocol.eq_ignore_ascii_case(proto)
                    && st.local_port == self.port
                {
                    return Ok(Plan::noop("rule matches"));
                }
                let mut script = String::new();
                if st.exists {
                    script.push_str(&format!(
                        "Remove-NetFirewallRule -Name {}\n",
                        ps_wildcard_literal(&self.name)
                    ));
                }
                script.push_str(&format!(
                    "New-NetFirewallRule -Name {n} -DisplayName {n} -Direction {dir} -Action {act} -Protocol {proto} -LocalPort {} -Enabled True | Out-Null",
                    ps_quote(&self.port)
                ));
                Ok(Plan::Change(Change {
                    diff: Some(if st.exists {
                        format!("- {have}\n+ {want}")
                    } else {
                        format!("+ {want}")
                    }),
                    steps: vec![step(script)],
                    touches,
                    ..Change::upsert(st.exists, "rule differs")
                }))
            }
            State::Absent if !st.exists => Ok(Plan::noop("absent")),
            State::Absent => Ok(Plan::Change(Change {
                action: Action::Delete,
                reason: "present".into(),
                diff: Some(format!("- {have}")),
                steps: vec![step(format!(
                    "Remove-NetFirewallRule -Name {}",
                    ps_wildcard_literal(&self.name)
                ))],
                touches,
            })),
        }
    }
}
