"""The login page, throttled (guard.py): a clear message and 429 past the limit, never a 500.

The attempt is reserved (counted as a failure) before Django checks the password,
so concurrent attempts cannot all slip under the limit; a success clears it."""

from django.contrib.auth import views as auth_views

from . import guard


class ThrottledLoginView(auth_views.LoginView):
    def post(self, request, *args, **kwargs):
        self._username = request.POST.get("username", "")
        self._ip = guard.client_ip(request)
        wait = guard.reserve_attempt(username=self._username, ip=self._ip)
        if wait:
            minutes = max(1, round(wait / 60))
            form = self.get_form()
            context = self.get_context_data(
                form=form,
                throttled=f"Too many failed logins for this account or from this address. "
                          f"Try again in about {minutes} minute{'s' if minutes != 1 else ''}.")
            response = self.render_to_response(context, status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_valid(self, form):
        guard.clear_account(username=self._username)
        return super().form_valid(form)
