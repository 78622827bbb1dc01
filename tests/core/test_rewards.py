from __future__ import annotations

import pytest

from rods_env.rewards import mentions


@pytest.mark.parametrize(
    ("text", "output", "expected"),
    [
        ("The total is 100 dollars.", "10", False),
        ("The total is 10 dollars.", "10", True),
        ("The total is 10.5 dollars.", "10", False),
        ("The total is $10.00.", "10", True),
        ("Refund: 1,234.50 USD", "1234.5", True),
        ("Refund: 1234.50 USD", "1,234.50", True),
        ("Refund: $54.04.", "54.04", True),
        ("On 2024-03-05 we shipped", "3", False),
        ("Tracking number: 1Z9999.", "1z9999", True),
        ("Tracking number: 1Z99990.", "1Z9999", False),
        ("Order #W0012 is cancelled", "#W0012", True),
        ("Order #W00123 is cancelled", "#W0012", False),
        ("there are 3 variants", "3", True),
        ("there are 13 variants", "3", False),
        ("Your flight is DELAYED", "delayed", True),
        ("anything", "", True),
        ("Sorry, I can't do that now.", "cannot|can't|unable", True),
        ("I am unable to help.", "cannot|can't|unable", True),
        ("Done, it is cancelled.", "cannot|can't|unable", False),
        ("Your total is 100.", "10|20", False),
    ],
)
def test_mentions_whole_token(text, output, expected):
    assert mentions(text, output) is expected
