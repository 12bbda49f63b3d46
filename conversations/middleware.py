from django.conf import settings
from django.shortcuts import resolve_url


class HtmxLoginRedirectMiddleware:
    """Send an htmx request whose session expired to the login page as a whole page.

    htmx follows a 302 inside its XHR and would swap the login form into whatever
    element asked for a fragment; HX-Redirect makes it load the page instead.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            getattr(request, "htmx", False)
            and response.status_code == 302
            and response.get("Location", "").startswith(resolve_url(settings.LOGIN_URL))
        ):
            location = response["Location"]
            response.status_code = 204
            response.content = b""
            del response["Location"]
            response["HX-Redirect"] = location
        return response
