// A recording's title, as the sender gives it at upload or renames it: plain text on one
// screen. Characters that would hide or reorder what the title shows are refused with
// 400 invalid_title, never cut or kept silently: C0 controls but tab and line breaks
// (a NUL cut a title short where it was stored), DEL, C1 controls, and the bidi
// embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) that make a title
// read otherwise than it is written. The marks U+200E, U+200F and U+061C stay: right-to-left
// scripts need them.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

function hex(c) {
  return "U+" + ("000" + c.charCodeAt(0).toString(16).toUpperCase()).slice(-4);
}

// Why `title` cannot be a title ({code, message} for a 400), or null.
function refusal(title) {
  const m = CONTROL.exec(title);
  if (!m) return null;
  const at = Array.from(title.slice(0, m.index)).length + 1;
  return {
    code: "invalid_title",
    message: "The title holds the control character " + hex(m[0]) + " (character " + at + "); a title is plain text: " +
      "remove it and send the title again.",
  };
}

module.exports = { refusal: refusal };
