//! `only_if`: the name of one of the task's `inputs`; the module acts only while that input
//! is `true` (another task decides: a Windows node's pending reboot asks for its drain and its
//! restart). Read by `kube_drain` and Windows `reboot`.

use kwin_engine::module::{Ctx, ModuleError, ParamError};

/// A checked `only_if` parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnlyIf(String);

impl OnlyIf {
    /// The parameter as given: an input name (lowercase letters, digits, `_`), or none.
    pub fn parse(name: Option<String>) -> Result<Option<OnlyIf>, ParamError> {
        match name {
            None => Ok(None),
            Some(n)
                if !n.is_empty()
                    && n.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') =>
            {
                Ok(Some(OnlyIf(n)))
            }
            Some(n) => Err(ParamError::at(
                "only_if",
                format!("`{n}` is not an input name (lowercase letters, digits, `_`)"),
            )),
        }
    }

    /// The input's name.
    pub fn name(&self) -> &str {
        &self.0
    }

    /// Whether the input is `true` (`InputPending` until the engine resolved it).
    pub fn asks(&self, ctx: &Ctx<'_>) -> Result<bool, ModuleError> {
        Ok(ctx.inputs.get(&self.0)?.expose().trim() == "true")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kwin_engine::module::Inputs;
    use kwin_engine::secret::Secret;
    use kwin_engine::transport::Shell;

    #[test]
    fn only_an_input_name_is_taken() {
        assert_eq!(OnlyIf::parse(None), Ok(None));
        assert!(OnlyIf::parse(Some("reboot_pending".into())).is_ok());
        for bad in ["", "Pending", "a-b", "a b"] {
            assert!(OnlyIf::parse(Some(bad.into())).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn it_asks_only_while_the_input_is_true() {
        fn asks(only: &OnlyIf, inputs: &Inputs) -> Result<bool, ModuleError> {
            only.asks(&Ctx {
                shell: Shell::PowerShell,
                host: "ww1",
                inputs,
                nonce: "0",
            })
        }
        let only = OnlyIf::parse(Some("pending".into()))
            .expect("name")
            .expect("set");
        assert_eq!(
            asks(&only, &Inputs::new()),
            Err(ModuleError::InputPending("pending".into()))
        );
        for (value, want) in [
            ("true", true),
            ("true\n", true),
            ("false", false),
            ("", false),
        ] {
            let mut inputs = Inputs::new();
            inputs.insert("pending", Secret::new(value.to_string()));
            assert_eq!(asks(&only, &inputs), Ok(want), "{value:?}");
        }
    }
}
