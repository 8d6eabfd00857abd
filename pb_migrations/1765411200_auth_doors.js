/// <reference path="../pb_data/types.d.ts" />
// H2, second pass: every auth door is rate limited, not only the logins.
// The doors that send e-mail (password reset, verification, one-time
// passwords, e-mail change) answered 204 to any number of anonymous requests,
// each a mail sent; the doors that take a mailed token were open to guessing.
// PocketBase's limiter counts per address and per collection; the rules'
// windows restart `duration` seconds after the last request let through, so
// that is the longest anyone waits (errors.js says it in Retry-After).
// Rules an owner added in the panel are kept.
const DOORS = [
  { label: "*:requestPasswordReset", audience: "", duration: 60, maxRequests: 3 },
  { label: "*:requestVerification", audience: "", duration: 60, maxRequests: 3 },
  { label: "*:requestOTP", audience: "", duration: 60, maxRequests: 3 },
  { label: "*:requestEmailChange", audience: "", duration: 60, maxRequests: 3 },
  { label: "*:confirmPasswordReset", audience: "", duration: 60, maxRequests: 10 },
  { label: "*:confirmVerification", audience: "", duration: 60, maxRequests: 10 },
  { label: "*:confirmEmailChange", audience: "", duration: 60, maxRequests: 10 },
];

function rulesOf(settings) {
  const out = [];
  for (const r of settings.rateLimits.rules) {
    out.push({ label: r.label, audience: r.audience, duration: r.duration, maxRequests: r.maxRequests });
  }
  return out;
}

migrate((app) => {
  const settings = app.settings();
  const rules = rulesOf(settings);
  for (const door of DOORS) {
    if (!rules.some((r) => r.label === door.label)) rules.push(door);
  }
  unmarshal({ rateLimits: { enabled: true, rules: rules } }, settings);
  app.save(settings);
}, (app) => {
  const settings = app.settings();
  const ours = DOORS.map((d) => d.label);
  unmarshal({ rateLimits: { rules: rulesOf(settings).filter((r) => ours.indexOf(r.label) < 0) } }, settings);
  app.save(settings);
});
