/// <reference path="../pb_data/types.d.ts" />
// The pipeline's internal routes: the atomic claim and the fenced writes, each declared
// once in lib/pipeline.js's ROUTES (its method and path, its function, its body limit),
// open to the service user only (anonymous 401, any other account 403). A handler sees
// nothing of this file (its top-level variables included): it requires the module and
// is answered by the route's function, found by the pattern the router matched.
for (const [pattern, route] of Object.entries(require(`${__hooks}/lib/pipeline.js`).ROUTES)) {
  const [method, path] = pattern.split(" ");
  const limits = route.bodyLimit === undefined ? [] : [$apis.bodyLimit(route.bodyLimit)];
  routerAdd(method, path, (e) => require(`${__hooks}/lib/pipeline.js`).serve(e), $apis.requireAuth("services"), ...limits);
}
