"""A one-file Django site for tests/test_subprocesses.py: `django_site.py runserver PORT`
runs Django's development server under its reloader (the server is a child process that the
reloader starts again with the same command line). Each request spends 20 ms of CPU in
render_report."""

import sys
import time

from django.conf import settings
from django.http import HttpResponse
from django.urls import path

settings.configure(
    DEBUG=True,
    SECRET_KEY="test",
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["*"],
    INSTALLED_APPS=[],
)


def render_report():
    t = time.process_time()
    while time.process_time() - t < 0.02:
        pass


def view(request):
    render_report()
    return HttpResponse("ok")


urlpatterns = [path("", view)]

if __name__ == "__main__":
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
