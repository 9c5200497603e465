//! Params of `directory` (Linux: `linux/directory.rs`, Windows: `windows/directory.rs`).

use super::{RawMode, State};

/// Params of `directory`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DirectoryParams {
    /// Absolute path of the directory.
    pub path: String,
    /// Permission bits of the directory itself (`"0755"`). Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub mode: Option<RawMode>,
    /// Owning user (name or uid). Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub owner: Option<String>,
    /// Owning group (name or gid). Linux only.
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub group: Option<String>,
    /// `present` (default) or `absent` (removed with everything in it).
    #[serde(default)]
    pub state: State,
    /// Follow a symbolic link at the managed path and manage its target (default `false`: a
    /// link there is refused, since whoever made it chose what root would change). Linux only.
    #[serde(default)]
    #[schemars(extend("x-kwin-shell" = "linux"))]
    pub follow: Option<bool>,
    /// Who may use the directory (Windows only): `private` (SYSTEM and Administrators),
    /// `readable` (also Users, to read and run), `inherited` (the ACL it inherits stays). With
    /// any of them a directory (or one above it) that another account owns, or a link, is
    /// refused. Unset: neither set nor checked.
    #[schemars(extend("x-kwin-shell" = "windows"))]
    pub access: Option<Access>,
}

/// Who may use a Windows directory kwin manages (`directory`'s `access`).
///
/// The descriptors: containerd's own for its root and state directories
/// (containerd/containerd pkg/sys/filesys_windows.go `SddlAdministratorsLocalSystem`,
/// `D:P(A;OICI;GA;;;BA)(A;OICI;GA;;;SY)`, with FA for GA so that what is read back is what was
/// written), and for a directory on the machine Path, AKS's for C:\k (Azure/AgentBaker
/// parts/windows/kuberneteswindowssetup.ps1.template: `icacls c:\k /inheritance:r`, SYSTEM and
/// Administrators full, Users read and execute; from Azure/aks-engine#4633, where C:\k
/// inherited "Authenticated Users: Modify"). Windows Server's C:\ lets Users create folders
/// and files below it (DISA STIG WN22-00-000140), which a directory kwin makes inherits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// SYSTEM and Administrators only (owner Administrators; nothing inherited).
    Private,
    /// As `private`, and Users may read and run what is in it.
    Readable,
    /// The inherited ACL stays; only who owns it and the directories above it is checked.
    Inherited,
}

impl Access {
    /// The security descriptor (SDDL: owner and DACL) kwin sets, or `None` for `inherited`.
    pub fn sddl(self) -> Option<&'static str> {
        match self {
            Access::Private => Some("O:BAD:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"),
            Access::Readable => {
                Some("O:BAD:PAI(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)(A;OICI;0x1200a9;;;BU)")
            }
            Access::Inherited => None,
        }
    }

    /// The explicit rules of [`Access::sddl`] as the ACL fact reads them back
    /// (`SID:rights:inheritance:propagation:type`; FullControl 2032127 = 0x1F01FF,
    /// ReadAndExecute with Synchronize 1179817 = 0x1200A9, ContainerInherit|ObjectInherit 3,
    /// Allow 0), sorted.
    pub fn rules(self) -> Vec<String> {
        let mut r = match self {
            Access::Private => vec!["S-1-5-18:2032127:3:0:0", "S-1-5-32-544:2032127:3:0:0"],
            Access::Readable => vec![
                "S-1-5-18:2032127:3:0:0",
                "S-1-5-32-544:2032127:3:0:0",
                "S-1-5-32-545:1179817:3:0:0",
            ],
            Access::Inherited => vec![],
        };
        r.sort_unstable();
        r.into_iter().map(str::to_string).collect()
    }
}

impl DirectoryParams {
    /// The parameters only the Linux module reads, and whether each is set.
    pub(crate) fn linux_fields(&self) -> [(&'static str, bool); 4] {
        [
            ("mode", self.mode.is_some()),
            ("owner", self.owner.is_some()),
            ("group", self.group.is_some()),
            ("follow", self.follow.is_some()),
        ]
    }

    /// The parameters only the Windows module reads, and whether each is set.
    pub(crate) fn windows_fields(&self) -> [(&'static str, bool); 1] {
        [("access", self.access.is_some())]
    }
}
