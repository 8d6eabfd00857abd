/// <reference path="../pb_data/types.d.ts" />
// PocketBase's own request log (auxiliary.db, the panel's Logs): kept 7 days,
// set here rather than left to PocketBase's default, so the README can say it.
// Requests carry addresses and paths; a week is enough to look into a problem.
migrate((app) => {
  const settings = app.settings();
  settings.logs.maxDays = 7;
  app.save(settings);
}, (app) => {
  const settings = app.settings();
  settings.logs.maxDays = 5;
  app.save(settings);
});
