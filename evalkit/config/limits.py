"""The documented ranges of the config's numeric fields, shared by every schema module and by the overrides.

A value outside them cannot be meant and is refused with the range (a ``delay`` of 2**63 ms passed validation and
hung the run with no request sent); floats must be finite.
"""

from __future__ import annotations

#: a day, in seconds: the longest pause or stretch of audio a config may ask for
DAY_S = 86_400
#: a week, in seconds: the longest timeout or deadline a config may ask for
WEEK_S = 604_800
#: most requests in flight against one URL (batch_size, judge_concurrency)
MAX_IN_FLIGHT = 65_536
#: most retries of one request after its first attempt
MAX_RETRIES = 100
#: most tokens generated per answer (beyond the longest context windows served)
MAX_TOKENS = 10_000_000
#: highest sampling temperature (servers take 0-2; nothing meaningful samples hotter than this)
MAX_TEMPERATURE = 100
#: largest answer body: a stored answer must fit SQLite's 1,000,000,000-byte value limit with room to spare
MAX_RESPONSE_BYTES = 512 * 1024 * 1024
#: longest image side in pixels (JPEG's limit is 65,535) and most pixels (that side squared)
MAX_IMAGE_SIDE = 65_536
MAX_IMAGE_PIXELS = MAX_IMAGE_SIDE * MAX_IMAGE_SIDE
#: most requests per minute (about 166,000 a second) and tokens per minute a rate limit may name
MAX_REQUESTS_PER_MINUTE = 10_000_000
MAX_TOKENS_PER_MINUTE = 10_000_000_000
#: most samples per dataset
MAX_SAMPLES = 1_000_000_000
#: seeds are 64-bit integers, as servers and numpy take them
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1
