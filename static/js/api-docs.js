// The API docs page (templates/ninja/swagger.html): Swagger UI with django-ninja's
// settings, but without deep links: a deep link is a link inside each operation's
// expand button, a control nested in a control that screen readers cannot reach.
(function () {
  "use strict";
  var body = document.querySelector("body").dataset;
  var config = JSON.parse(document.getElementById("swagger-settings").textContent);
  config.deepLinking = false;
  config.dom_id = "#swagger-ui";
  config.presets = [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset];
  if (body.apiCsrf && body.csrfToken) {
    config.requestInterceptor = function (request) {
      request.headers["X-CSRFToken"] = body.csrfToken;
      return request;
    };
  }
  SwaggerUIBundle(config);
})();
