/// <reference path="../pb_data/types.d.ts" />
// H2: logins are rate limited. PocketBase's own limiter, off by default, is
// turned on for password logins of every auth collection (senders, the
// service account, the owner's superuser login): a burst of guesses gets 429.
// Nothing else is limited here: the workers' claims and writes are frequent
// by design, and uploads are bounded by the intake's own checks.
migrate((app) => {
  const settings = app.settings();
  unmarshal({
    rateLimits: {
      enabled: true,
      rules: [{ label: "*:auth", audience: "", duration: 10, maxRequests: 20 }],
    },
  }, settings);
  app.save(settings);
}, (app) => {
  const settings = app.settings();
  unmarshal({ rateLimits: { enabled: false, rules: [] } }, settings);
  app.save(settings);
});
