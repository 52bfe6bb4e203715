// The docs page's start: Swagger UI on the OpenAPI document this server
// serves. A file of its own, not an inline script, so that the page's
// Content-Security-Policy (`default-src 'self'`) can forbid inline
// script. What differs between listeners (the document's path, whether
// "Try it out" can reach the operations) is read from the page.
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  var tryItOut = root.getAttribute("data-try-it-out") === "true";
  window.ui = SwaggerUIBundle({
    url: root.getAttribute("data-spec"),
    dom_id: "#swagger-ui",
    // Offline: no badge fetched from the public validator.
    validatorUrl: null,
    deepLinking: false,
    displayOperationId: true,
    // The admin listener serves no operation: its page is a reference.
    supportedSubmitMethods: tryItOut ? ["get", "post", "head"] : [],
    // A key typed into "Authorize" lives in this tab only, never in
    // the browser's storage.
    persistAuthorization: false,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout"
  });
})();
