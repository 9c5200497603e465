//! WS-Management SOAP envelopes for the Windows Remote Shell (WinRS) resource, and parsing of
//! the replies (`roxmltree`).
//!
//! Requests are built from fixed templates with every variable part XML-escaped. Replies are
//! parsed by namespace and local name, never by prefix. A reply must relate to the request:
//! `a:RelatesTo` = our `a:MessageID` ("the related message's identifier is the [message id]
//! property value from the message being replied to", WS-Addressing, Formulating a Reply
//! Message; pypsrp 0.9.1 `wsman.py` `_invoke` refuses a reply without it too). A fault that
//! names the message it relates to must name ours.

use base64::Engine as _;
use std::time::Duration;

pub const NS_SOAP: &str = "http://www.w3.org/2003/05/soap-envelope";
pub const NS_ADDRESSING: &str = "http://schemas.xmlsoap.org/ws/2004/08/addressing";
pub const NS_WSMAN: &str = "http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd";
pub const NS_WSMAN_MS: &str = "http://schemas.microsoft.com/wbem/wsman/1/wsman.xsd";
pub const NS_SHELL: &str = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell";
pub const NS_FAULT: &str = "http://schemas.microsoft.com/wbem/wsman/1/wsmanfault";
pub const NS_IDENTITY: &str = "http://schemas.dmtf.org/wbem/wsman/identity/1/wsmanidentity.xsd";

pub const RESOURCE_CMD: &str = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/cmd";
const ANONYMOUS: &str = "http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous";
const ACTION_CREATE: &str = "http://schemas.xmlsoap.org/ws/2004/09/transfer/Create";
const ACTION_DELETE: &str = "http://schemas.xmlsoap.org/ws/2004/09/transfer/Delete";
const ACTION_COMMAND: &str = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/Command";
const ACTION_SEND: &str = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/Send";
const ACTION_RECEIVE: &str = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/Receive";
const ACTION_SIGNAL: &str = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/Signal";
const SIGNAL_TERMINATE: &str =
    "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/signal/terminate";
const STATE_DONE: &str =
    "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/CommandState/Done";

/// WSManFault code of a Receive that saw no output within its OperationTimeout.
pub const CODE_TIMED_OUT: u64 = 2150858793;
/// WSManFault code of an unknown (deleted, or gone after a reboot) shell.
pub const CODE_SHELL_NOT_FOUND: u64 = 2150858843;

/// The MaxEnvelopeSize kwin asks for: Windows Server 2012 and later default to 500 KiB.
pub const MAX_ENVELOPE: usize = 512_000;

/// Escape text for an XML element or attribute value.
pub fn escape(s: &str) -> String {
    crate::quote::xml_escape(s)
}

/// A fresh `uuid:` message id (random UUID v4, upper case as Windows writes them).
pub fn new_message_id() -> String {
    use rand::Rng;
    let mut b: [u8; 16] = rand::rng().random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode_upper(b);
    format!(
        "uuid:{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// `PT<seconds>S`, with milliseconds when needed.
pub fn duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("PT{}S", d.as_secs())
    } else {
        format!("PT{}.{:03}S", d.as_secs(), d.subsec_millis())
    }
}

/// What every request header carries.
#[derive(Debug, Clone)]
pub struct Header<'a> {
    /// The endpoint URL, `http://host:5985/wsman`.
    pub to: &'a str,
    pub message_id: &'a str,
    pub operation_timeout: Duration,
}

fn envelope(
    h: &Header<'_>,
    action: &str,
    shell_id: Option<&str>,
    options: &[(&str, &str)],
    body: &str,
) -> String {
    let selectors = match shell_id {
        Some(id) => format!(
            "<w:SelectorSet><w:Selector Name=\"ShellId\">{}</w:Selector></w:SelectorSet>",
            escape(id)
        ),
        None => String::new(),
    };
    let options = if options.is_empty() {
        String::new()
    } else {
        let mut o = String::from("<w:OptionSet>");
        for (name, value) in options {
            o.push_str(&format!(
                "<w:Option Name=\"{}\">{}</w:Option>",
                escape(name),
                escape(value)
            ));
        }
        o.push_str("</w:OptionSet>");
        o
    };
    let body = if body.is_empty() {
        "<s:Body/>".to_string()
    } else {
        format!("<s:Body>{body}</s:Body>")
    };
    format!(
        "<s:Envelope xmlns:s=\"{NS_SOAP}\" xmlns:a=\"{NS_ADDRESSING}\" xmlns:w=\"{NS_WSMAN}\" \
         xmlns:p=\"{NS_WSMAN_MS}\" xmlns:rsp=\"{NS_SHELL}\">\
         <s:Header>\
         <a:To>{to}</a:To>\
         <a:ReplyTo><a:Address s:mustUnderstand=\"true\">{ANONYMOUS}</a:Address></a:ReplyTo>\
         <w:MaxEnvelopeSize s:mustUnderstand=\"true\">{MAX_ENVELOPE}</w:MaxEnvelopeSize>\
         <a:MessageID>{id}</a:MessageID>\
         <w:Locale xml:lang=\"en-US\" s:mustUnderstand=\"false\"/>\
         <p:DataLocale xml:lang=\"en-US\" s:mustUnderstand=\"false\"/>\
         <w:OperationTimeout>{timeout}</w:OperationTimeout>\
         <w:ResourceURI s:mustUnderstand=\"true\">{RESOURCE_CMD}</w:ResourceURI>\
         <a:Action s:mustUnderstand=\"true\">{action}</a:Action>\
         {selectors}{options}\
         </s:Header>{body}</s:Envelope>",
        to = escape(h.to),
        id = escape(h.message_id),
        timeout = duration(h.operation_timeout),
    )
}

/// How long the service keeps a shell nobody uses (a transport dropped without `close`
/// leaves its shell behind at most this long).
pub const SHELL_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// Create a shell with stdin and stdout/stderr, UTF-8 code page.
pub fn create_shell(h: &Header<'_>) -> String {
    envelope(
        h,
        ACTION_CREATE,
        None,
        &[("WINRS_NOPROFILE", "FALSE"), ("WINRS_CODEPAGE", "65001")],
        &format!(
            "<rsp:Shell><rsp:IdleTimeOut>{}</rsp:IdleTimeOut>\
             <rsp:InputStreams>stdin</rsp:InputStreams>\
             <rsp:OutputStreams>stdout stderr</rsp:OutputStreams></rsp:Shell>",
            duration(SHELL_IDLE_TIMEOUT)
        ),
    )
}

/// Start `command` with `arguments` in the shell. stdin is a pipe (not console input).
pub fn command(h: &Header<'_>, shell_id: &str, command: &str, arguments: &[&str]) -> String {
    let mut body = format!(
        "<rsp:CommandLine><rsp:Command>{}</rsp:Command>",
        escape(command)
    );
    for a in arguments {
        body.push_str(&format!("<rsp:Arguments>{}</rsp:Arguments>", escape(a)));
    }
    body.push_str("</rsp:CommandLine>");
    envelope(
        h,
        ACTION_COMMAND,
        Some(shell_id),
        &[
            ("WINRS_CONSOLEMODE_STDIN", "FALSE"),
            ("WINRS_SKIP_CMD_SHELL", "FALSE"),
        ],
        &body,
    )
}

/// Send `data` to the command's stdin; `end` closes it.
pub fn send(h: &Header<'_>, shell_id: &str, command_id: &str, data: &[u8], end: bool) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(data);
    let end = if end { " End=\"true\"" } else { "" };
    envelope(
        h,
        ACTION_SEND,
        Some(shell_id),
        &[],
        &format!(
            "<rsp:Send><rsp:Stream Name=\"stdin\" CommandId=\"{}\"{end}>{b64}</rsp:Stream></rsp:Send>",
            escape(command_id)
        ),
    )
}

/// The size of a Send envelope carrying `data_len` bytes (for chunking under the limit).
#[cfg(test)]
pub fn send_envelope_len(data_len: usize) -> usize {
    // base64 length + the fixed parts of the envelope (ids, URLs) with generous slack
    data_len.div_ceil(3) * 4 + 2048
}

/// Long-poll the command's stdout and stderr.
pub fn receive(h: &Header<'_>, shell_id: &str, command_id: &str) -> String {
    envelope(
        h,
        ACTION_RECEIVE,
        Some(shell_id),
        &[("WSMAN_CMDSHELL_OPTION_KEEPALIVE", "TRUE")],
        &format!(
            "<rsp:Receive><rsp:DesiredStream CommandId=\"{}\">stdout stderr</rsp:DesiredStream></rsp:Receive>",
            escape(command_id)
        ),
    )
}

/// Terminate the command (and release it).
pub fn signal_terminate(h: &Header<'_>, shell_id: &str, command_id: &str) -> String {
    envelope(
        h,
        ACTION_SIGNAL,
        Some(shell_id),
        &[],
        &format!(
            "<rsp:Signal CommandId=\"{}\"><rsp:Code>{SIGNAL_TERMINATE}</rsp:Code></rsp:Signal>",
            escape(command_id)
        ),
    )
}

/// Delete the shell (kills what still runs in it).
pub fn delete_shell(h: &Header<'_>, shell_id: &str) -> String {
    envelope(h, ACTION_DELETE, Some(shell_id), &[], "")
}

/// WS-Management Identify (answers who the service is; checks credentials cheaply).
pub fn identify() -> String {
    format!(
        "<s:Envelope xmlns:s=\"{NS_SOAP}\" xmlns:wsmid=\"{NS_IDENTITY}\"><s:Header/>\
         <s:Body><wsmid:Identify/></s:Body></s:Envelope>"
    )
}

// ---------------------------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------------------------

/// A SOAP fault from the WS-Management service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// `s:Subcode/s:Value`, e.g. `w:TimedOut`.
    pub subcode: String,
    /// `f:WSManFault/@Code`.
    pub code: Option<u64>,
    /// `f:Message`, else `s:Reason/s:Text`.
    pub message: String,
    pub machine: Option<String>,
}

impl Fault {
    pub fn is_timed_out(&self) -> bool {
        self.code == Some(CODE_TIMED_OUT) || self.subcode.ends_with(":TimedOut")
    }
    pub fn is_shell_not_found(&self) -> bool {
        self.code == Some(CODE_SHELL_NOT_FOUND)
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let msg = self.message.trim();
        match self.code {
            Some(c) => write!(f, "{msg} ({}, code {c})", self.subcode),
            None => write!(f, "{msg} ({})", self.subcode),
        }
    }
}

/// A reply that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadReply(pub String);

/// Output of one Receive.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Received {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// `Some(exit code)` once the command is Done.
    pub done: Option<i32>,
}

fn parse(xml: &[u8]) -> Result<roxmltree::Document<'_>, BadReply> {
    let text = std::str::from_utf8(xml).map_err(|_| BadReply("reply is not utf-8".into()))?;
    roxmltree::Document::parse(text).map_err(|e| BadReply(format!("reply is not xml: {e}")))
}

fn child<'a, 'i>(
    node: roxmltree::Node<'a, 'i>,
    ns: &str,
    name: &str,
) -> Option<roxmltree::Node<'a, 'i>> {
    node.children().find(|n| {
        n.is_element() && n.tag_name().name() == name && n.tag_name().namespace() == Some(ns)
    })
}

fn descendant<'a, 'i>(
    node: roxmltree::Node<'a, 'i>,
    ns: &str,
    name: &str,
) -> Option<roxmltree::Node<'a, 'i>> {
    node.descendants().find(|n| {
        n.is_element() && n.tag_name().name() == name && n.tag_name().namespace() == Some(ns)
    })
}

fn all_text(node: roxmltree::Node<'_, '_>) -> String {
    node.descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect::<String>()
}

/// The fault in `xml`, if it is a SOAP fault.
pub fn fault(xml: &[u8]) -> Option<Fault> {
    let doc = parse(xml).ok()?;
    let root = doc.root_element();
    let body = child(root, NS_SOAP, "Body")?;
    let f = child(body, NS_SOAP, "Fault")?;
    let subcode = child(f, NS_SOAP, "Code")
        .and_then(|c| child(c, NS_SOAP, "Subcode"))
        .and_then(|s| child(s, NS_SOAP, "Value"))
        .or_else(|| child(f, NS_SOAP, "Code").and_then(|c| child(c, NS_SOAP, "Value")))
        .map(all_text)
        .unwrap_or_default()
        .trim()
        .to_string();
    let wsman = descendant(f, NS_FAULT, "WSManFault");
    let code = wsman
        .and_then(|w| w.attribute("Code"))
        .and_then(|c| c.trim().parse::<u64>().ok());
    let machine = wsman
        .and_then(|w| w.attribute("Machine"))
        .map(str::to_string);
    let message = wsman
        .and_then(|w| child(w, NS_FAULT, "Message"))
        .map(all_text)
        .filter(|m| !m.trim().is_empty())
        .or_else(|| {
            child(f, NS_SOAP, "Reason")
                .and_then(|r| child(r, NS_SOAP, "Text"))
                .map(all_text)
        })
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    Some(Fault {
        subcode,
        code,
        message,
        machine,
    })
}

fn relates_to_of(root: roxmltree::Node<'_, '_>) -> Option<String> {
    child(root, NS_SOAP, "Header")
        .and_then(|h| child(h, NS_ADDRESSING, "RelatesTo"))
        .map(all_text)
        .map(|t| t.trim().to_string())
}

/// The `a:RelatesTo` of an envelope, if it has one.
pub fn relates_to(xml: &[u8]) -> Option<String> {
    let doc = parse(xml).ok()?;
    relates_to_of(doc.root_element())
}

/// Check that a reply is a SOAP envelope relating to `message_id`; return its body element's
/// document for further parsing.
fn reply<'i>(xml: &'i [u8], message_id: &str) -> Result<roxmltree::Document<'i>, BadReply> {
    let doc = parse(xml)?;
    let root = doc.root_element();
    if root.tag_name().name() != "Envelope" || root.tag_name().namespace() != Some(NS_SOAP) {
        return Err(BadReply("reply is not a soap 1.2 envelope".into()));
    }
    match relates_to_of(root) {
        None => {
            return Err(BadReply(format!(
                "reply has no a:RelatesTo (expected {message_id}): it does not say it answers this request"
            )))
        }
        Some(relates) if relates != message_id => {
            return Err(BadReply(format!(
                "reply relates to {relates}, expected {message_id}"
            )))
        }
        Some(_) => {}
    }
    if child(root, NS_SOAP, "Body").is_none() {
        return Err(BadReply("reply has no soap body".into()));
    }
    Ok(doc)
}

fn body<'a, 'i>(doc: &'a roxmltree::Document<'i>) -> Option<roxmltree::Node<'a, 'i>> {
    child(doc.root_element(), NS_SOAP, "Body")
}

/// Any reply relating to `message_id` (Send, Signal, Delete).
pub fn parse_ack(xml: &[u8], message_id: &str) -> Result<(), BadReply> {
    reply(xml, message_id).map(|_| ())
}

/// The ShellId of a Create reply.
pub fn parse_shell_id(xml: &[u8], message_id: &str) -> Result<String, BadReply> {
    let doc = reply(xml, message_id)?;
    let b = body(&doc).ok_or_else(|| BadReply("no body".into()))?;
    let from_shell = descendant(b, NS_SHELL, "ShellId").map(all_text);
    let from_selector = b
        .descendants()
        .find(|n| {
            n.is_element()
                && n.tag_name().name() == "Selector"
                && n.tag_name().namespace() == Some(NS_WSMAN)
                && n.attribute("Name") == Some("ShellId")
        })
        .map(all_text);
    from_shell
        .or(from_selector)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| BadReply("create reply names no ShellId".into()))
}

/// The CommandId of a Command reply.
pub fn parse_command_id(xml: &[u8], message_id: &str) -> Result<String, BadReply> {
    let doc = reply(xml, message_id)?;
    let b = body(&doc).ok_or_else(|| BadReply("no body".into()))?;
    descendant(b, NS_SHELL, "CommandId")
        .map(all_text)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| BadReply("command reply names no CommandId".into()))
}

/// The streams and state of a Receive reply.
pub fn parse_receive(xml: &[u8], message_id: &str) -> Result<Received, BadReply> {
    let doc = reply(xml, message_id)?;
    let b = body(&doc).ok_or_else(|| BadReply("no body".into()))?;
    let rr = child(b, NS_SHELL, "ReceiveResponse")
        .ok_or_else(|| BadReply("receive reply has no ReceiveResponse".into()))?;
    let mut out = Received::default();
    for s in rr
        .children()
        .filter(|n| n.is_element() && n.tag_name().namespace() == Some(NS_SHELL))
    {
        match s.tag_name().name() {
            "Stream" => {
                let text: String = all_text(s).split_whitespace().collect();
                if text.is_empty() {
                    continue;
                }
                let data = base64::engine::general_purpose::STANDARD
                    .decode(text.as_bytes())
                    .map_err(|e| BadReply(format!("stream data is not base64: {e}")))?;
                match s.attribute("Name") {
                    Some("stdout") => out.stdout.extend_from_slice(&data),
                    Some("stderr") => out.stderr.extend_from_slice(&data),
                    _ => {}
                }
            }
            "CommandState" => {
                let state = s.attribute("State").unwrap_or("");
                if state == STATE_DONE || state.ends_with("/CommandState/Done") {
                    let code = child(s, NS_SHELL, "ExitCode")
                        .map(all_text)
                        .and_then(|t| t.trim().parse::<i64>().ok())
                        .unwrap_or(-1);
                    // Windows writes exit codes as unsigned 32-bit numbers (0xFFFFFFFF for -1).
                    out.done = Some(code as u32 as i32);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MID: &str = "uuid:11111111-2222-4333-8444-555555555555";

    fn hdr() -> Header<'static> {
        Header {
            to: "http://127.0.0.1:5985/wsman",
            message_id: MID,
            operation_timeout: Duration::from_secs(20),
        }
    }

    #[test]
    fn requests_are_well_formed_soap() {
        let h = hdr();
        let all = [
            create_shell(&h),
            command(&h, "S1", "powershell.exe", &["-Command", "-", "a<b&\"c\""]),
            send(&h, "S1", "C1", b"echo hi\n", true),
            receive(&h, "S1", "C1"),
            signal_terminate(&h, "S1", "C1"),
            delete_shell(&h, "S1"),
            identify(),
        ];
        for xml in &all {
            let doc = roxmltree::Document::parse(xml).expect("well-formed");
            assert_eq!(doc.root_element().tag_name().namespace(), Some(NS_SOAP));
        }
        assert!(all[1].contains("<rsp:Arguments>a&lt;b&amp;&quot;c&quot;</rsp:Arguments>"));
        assert!(all[2].contains("End=\"true\">ZWNobyBoaQo=</rsp:Stream>"));
        assert!(all[3].contains("<w:OperationTimeout>PT20S</w:OperationTimeout>"));
        assert!(all[4].contains("<w:Selector Name=\"ShellId\">S1</w:Selector>"));
        assert!(!send(&h, "S1", "C1", b"", false).contains("End="));
    }

    #[test]
    fn durations_and_message_ids_are_formatted_for_ws_management() {
        assert_eq!(duration(Duration::from_secs(20)), "PT20S");
        assert_eq!(duration(Duration::from_millis(1500)), "PT1.500S");
        let id = new_message_id();
        assert_eq!(id.len(), 41);
        assert!(id.starts_with("uuid:") && id.as_bytes()[19] == b'4');
        assert_ne!(id, new_message_id());
        assert!(send_envelope_len(200 * 1024) < MAX_ENVELOPE);
    }

    // Replies captured from the lab's WinRM stand-in (pywinrm as the client, NTLM with message
    // encryption, unsealed), verbatim. Each relates to the MessageID named next to it.
    const CREATE: (&str, &str) = (
        include_str!("testdata/create.xml"),
        "uuid:190c929c-829f-4d7c-89b9-b0831c4f620a",
    );
    const COMMAND: (&str, &str) = (
        include_str!("testdata/command.xml"),
        "uuid:3103b6d0-5718-45d1-91ea-07c79a551415",
    );
    const RECEIVE_DONE: (&str, &str) = (
        include_str!("testdata/receive-done.xml"),
        "uuid:020e6a7a-f61d-468e-b840-f62acdfbcd98",
    );
    const SIGNAL: (&str, &str) = (
        include_str!("testdata/signal.xml"),
        "uuid:7dc4b614-e980-4e0a-902f-4bde1c7a92e8",
    );
    const DELETE: (&str, &str) = (
        include_str!("testdata/delete.xml"),
        "uuid:ba320913-56ff-403a-83de-9a472fdf188e",
    );
    const TIMED_OUT: &str = include_str!("testdata/fault-timed-out.xml");
    const SHELL_NOT_FOUND: &str = include_str!("testdata/fault-shell-not-found.xml");

    // Written for these tests: a Receive while the command runs, with Windows' way of writing
    // exit code -1 (unsigned), and a fault whose f:Message nests a ProviderFault as Windows
    // does for shell plugin errors.
    const RECEIVE_RUNNING: &str = r#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:a="http://schemas.xmlsoap.org/ws/2004/08/addressing" xmlns:rsp="http://schemas.microsoft.com/wbem/wsman/1/windows/shell"><s:Header><a:RelatesTo>uuid:11111111-2222-4333-8444-555555555555</a:RelatesTo></s:Header><s:Body><rsp:ReceiveResponse><rsp:Stream Name="stdout" CommandId="C1">YQ==</rsp:Stream><rsp:CommandState CommandId="C1" State="http://schemas.microsoft.com/wbem/wsman/1/windows/shell/CommandState/Running"/></rsp:ReceiveResponse></s:Body></s:Envelope>"#;
    const RECEIVE_MINUS_ONE: &str = r#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:a="http://schemas.xmlsoap.org/ws/2004/08/addressing" xmlns:rsp="http://schemas.microsoft.com/wbem/wsman/1/windows/shell"><s:Header><a:RelatesTo>uuid:11111111-2222-4333-8444-555555555555</a:RelatesTo></s:Header><s:Body><rsp:ReceiveResponse><rsp:Stream Name="stdout" CommandId="C1" End="true"></rsp:Stream><rsp:CommandState CommandId="C1" State="http://schemas.microsoft.com/wbem/wsman/1/windows/shell/CommandState/Done"><rsp:ExitCode>4294967295</rsp:ExitCode></rsp:CommandState></rsp:ReceiveResponse></s:Body></s:Envelope>"#;
    const PROVIDER_FAULT: &str = r#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Body><s:Fault><s:Code><s:Value>s:Sender</s:Value><s:Subcode><s:Value>w:InternalError</s:Value></s:Subcode></s:Code><s:Reason><s:Text xml:lang="en-US">reason text</s:Text></s:Reason><s:Detail><f:WSManFault xmlns:f="http://schemas.microsoft.com/wbem/wsman/1/wsmanfault" Code="2147943418" Machine="WIN-2019"><f:Message><f:ProviderFault provider="Shell cmd plugin" path="%systemroot%\system32\winrscmd.dll">The system cannot find the file specified. </f:ProviderFault></f:Message></f:WSManFault></s:Detail></s:Fault></s:Body></s:Envelope>"#;

    #[test]
    fn captured_replies_parse() {
        assert_eq!(
            parse_shell_id(CREATE.0.as_bytes(), CREATE.1).expect("shell id"),
            "61A18F74-C774-4B5A-BDC7-86B4610F4840"
        );
        let err = parse_shell_id(CREATE.0.as_bytes(), MID).expect_err("relates to another id");
        assert!(err.0.contains("relates to"), "{err:?}");
        assert_eq!(
            parse_command_id(COMMAND.0.as_bytes(), COMMAND.1).expect("command id"),
            "B5D697ED-68CB-404B-9274-46CB622589DF"
        );
        let r = parse_receive(RECEIVE_DONE.0.as_bytes(), RECEIVE_DONE.1).expect("receive");
        assert_eq!(r.stdout, b"hello\n");
        assert_eq!(r.stderr, b"oops\n");
        assert_eq!(r.done, Some(3));
        parse_ack(SIGNAL.0.as_bytes(), SIGNAL.1).expect("signal");
        parse_ack(DELETE.0.as_bytes(), DELETE.1).expect("delete");
        assert!(fault(RECEIVE_DONE.0.as_bytes()).is_none());
        assert!(parse_receive(CREATE.0.as_bytes(), CREATE.1).is_err());
        assert!(parse_receive(b"<not xml", MID).is_err());
        assert!(parse_ack(b"<x/>", MID).is_err());
    }

    #[test]
    fn a_reply_must_relate_to_the_request() {
        // The same reply without its a:RelatesTo, and relating to another message.
        let without = RECEIVE_RUNNING.replace(
            "<a:RelatesTo>uuid:11111111-2222-4333-8444-555555555555</a:RelatesTo>",
            "",
        );
        let err = parse_receive(without.as_bytes(), MID).expect_err("no RelatesTo");
        assert!(err.0.contains("no a:RelatesTo"), "{err:?}");
        let other = RECEIVE_RUNNING.replace("555555555555<", "555555555556<");
        let err = parse_receive(other.as_bytes(), MID).expect_err("another message");
        assert!(err.0.contains("relates to"), "{err:?}");
        for (xml, id) in [CREATE, COMMAND, RECEIVE_DONE, SIGNAL, DELETE] {
            assert_eq!(relates_to(xml.as_bytes()).as_deref(), Some(id));
            let bare = xml.replace(&format!("<a:RelatesTo>{id}</a:RelatesTo>"), "");
            assert_ne!(bare, xml, "the capture names its RelatesTo as written here");
            assert!(parse_ack(bare.as_bytes(), id).is_err());
        }
    }

    #[test]
    fn a_receive_reply_gives_its_output_and_exit_code_when_done() {
        let r = parse_receive(RECEIVE_RUNNING.as_bytes(), MID).expect("receive");
        assert_eq!(r.stdout, b"a");
        assert_eq!(r.done, None);
        let r = parse_receive(RECEIVE_MINUS_ONE.as_bytes(), MID).expect("receive");
        assert_eq!(r.done, Some(-1));
    }

    #[test]
    fn faults_are_classified_and_readable() {
        let f = fault(TIMED_OUT.as_bytes()).expect("fault");
        assert!(f.is_timed_out() && !f.is_shell_not_found());
        assert_eq!(f.code, Some(CODE_TIMED_OUT));
        assert_eq!(f.subcode, "w:TimedOut");
        assert_eq!(f.machine.as_deref(), Some("WIN-STANDIN"));
        assert_eq!(
            f.to_string(),
            "The WS-Management service cannot complete the operation within the time specified \
             in OperationTimeout. (w:TimedOut, code 2150858793)"
        );
        let f = fault(SHELL_NOT_FOUND.as_bytes()).expect("fault");
        assert!(f.is_shell_not_found() && !f.is_timed_out());
        assert_eq!(f.subcode, "w:InvalidSelectors");
        let f = fault(PROVIDER_FAULT.as_bytes()).expect("fault");
        assert_eq!(f.message, "The system cannot find the file specified.");
        assert!(fault(b"").is_none());
    }
}
