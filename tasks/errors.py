"""The one exception type for mistakes a user can fix.

Anything raised as ``UserError`` reaches the user as one sentence (no traceback) and the
command exits with code 2. The message names the file or field and says what to do.
"""


class UserError(Exception):
    """A problem in the user's input (a file, a field, a name) with a one-sentence fix."""

    exit_code = 2
