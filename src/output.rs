//! Rendering engine events: indicatif progress on a TTY, plain lines otherwise, JSON lines.
