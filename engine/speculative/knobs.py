"""Every number auto's planner and cost model decide by, each declared once with its reason.

``python -m engine bench --scenarios S`` (engine/sim/bench.py) and tests/test_simulated.py judge a change
to any of them on every simulated machine at once; a change judged on one bench pass is noise.
"""

from __future__ import annotations

# -- the plan space ---------------------------------------------------------------------------------------
K_MAX = 8  # the longest draft auto weighs (at acceptance 0.7 a ninth token adds about 1 %), and the positions
# whose acceptance is learnt apart (the last one: it and any deeper)
PROBE_ROUNDS = 2  # rounds a probe runs: one round's acceptance is a coin, two halve the chance of a false zero
# Over RPC a first sd probe drafts this many tokens: each verify width new to the remote context first builds its
# graph (four round trips), and one more row than ar's is the cheapest verify that times what a row costs
REMOTE_PROBE_K = 1
FIRST_PROBE_ROUNDS = 8  # a reply's first rounds re-plan the first probes (what the probes measured may open others)

# -- deciding -------------------------------------------------------------------------------------------
HOLD_ROUNDS = 4  # rounds a plan is kept before re-deciding (a decision weighs dozens of plans)
# ... ar's hold while every drafting mode is predicted below PROBE_IF_WITHIN of it: no probe or switch is then due
FAR_HOLD_ROUNDS = 16
BAIL_FACTOR = 2.0  # a round that doubles its plan's predicted round time (a tree width never run before, now
# measured) ends the hold: the rounds left of it would pay for what the figures now know (noise moves it 1.5x at most)
SWITCH_GAIN = 1.05  # a new plan must promise this much more: below it the switch is noise chasing noise
UNTRIED_GAIN = 1.15  # ... this much to start drafting on figures alone (no round of the plan measured yet)
PROBE_IF_WITHIN = 0.8  # another mode is re-measured only when predicted within this share of the current plan
FIRST_PROBE_GAP = 32  # rounds before a mode is re-measured; doubles after each probe that loses
MAX_PROBE_GAP = 1024  # ... up to this (four 256-token replies of ar): a machine that changed is seen again
HORIZON_TOKENS = 128  # the tokens a switch is paid back over when the reply's length is not known
PROBE_CATCHUP_SHARE = 0.05  # a probe's catch-up may cost at most this share of the rest of the reply
STRETCH_ALPHA = 0.3  # the tokens between two of the pool's drafts: about three stretches of memory

# -- the cost model's averages ----------------------------------------------------------------------------
TIMING_CLIP = 1.5  # a timing sample moves its average as at most this factor (one stalled round moves it little)
TIMING_ALPHA = 0.25  # draft, catch-up and tree times: about four rounds of memory
HIT_ALPHA = 0.2  # ssd's cache-hit rate: about five rounds
GUESS_ALPHA = 0.1  # the draft's top-1 and next-guess rates (a tree's hit probability): about ten rounds, from
# their priors (TOP1_PRIOR; the next guess: the acceptance)
ACCEPT_DECAY = 0.98  # acceptance fades per draft token: about fifty (a short draft's round says little)
ACCEPT_SEED_TRIALS = 16.0  # a restored acceptance counts as this many trials until new rounds outweigh it
ACCEPT_MAX = 0.999  # a position's acceptance stays below 1 (no run of luck makes a long draft look free)
# The target's verify time is the machine's pace (PACE_ALPHA: two or three rounds of memory) times each width's
# figure at pace 1 (FIGURE_ALPHA: about twenty): a slow spell seen by the widths that run moves the others too.
PACE_ALPHA = 0.4
FIGURE_ALPHA = 0.05
PACE_AFTER = 3  # a width's samples before its verifies move the pace (its figure is their mean until then) and,
# once two widths have as many, before other widths are read off it
# A pace that stays beyond PACE_BAND on one side for SPELL_VERIFIES verifies is no spell: each further verify
# hands PACE_HANDOVER of its distance from 1 to the figure of the width that ran (a lone wrong width stays its own).
PACE_BAND = 0.05
SPELL_VERIFIES = 8
PACE_HANDOVER = 0.1
# A spell whose mean pace is over 1 + SHIFT_BAND times or under 1 / (1 + SHIFT_BAND) times the figures' (speeds are
# ratios: 1.4x faster is 0.71, not 0.6) is another load (a program started or stopped), not noise (a 30 % swing per
# call moves the mean pace of nine verifies less: 1 such spell in 24,000 noisy verifies): the figures become priors,
# each replaced by its next sample, and every other mode is measured again
SHIFT_BAND = 0.4

# -- before data ------------------------------------------------------------------------------------------
ACCEPT_PRIOR = 0.6  # per-position acceptance of a draft token (the shipped pairs measure 0.6-0.8)
ACCEPT_PRIOR_TRIALS = 4.0  # ... worth this many trials (two rejected first rounds do not read as zero); a deeper
# position starts from the shallower one's acceptance, worth as many
TOP1_PRIOR = 0.6  # the draft's best alternative is right after a rejection
DRAFT_TOKEN_PRIOR = 0.02  # seconds per draft token: a 0.5 B draft on two cores
VERIFY_PRIOR = 0.05  # seconds of a one-token verify: a 1.5 B target on two cores
VERIFY_SLOPE_PRIOR = 0.3  # each further token of a verify, as a share of one, until two widths are measured
SPLIT_VERIFY_COST = 1.5  # a verify on ssd's split threads (fewer cores) against all cores, until measured
CATCHUP_SHARE = 0.25  # a catch-up token (one batch) against a sequential draft token
LOOKUP_PRIOR = {1: 0.25, 2: 0.4, 3: 0.55, 4: 0.65}  # acceptance of a pool token by n-gram order

# -- correcting predictions by what a plan's rounds did ------------------------------------------------------
TALLY_ROUNDS = 3  # rounds of a plan (or its mode) before their tally corrects its prediction
TALLY_DECAY = 0.95  # a tally's memory: about twenty rounds (in ten, a stall or two of the running plan read as a
# worse plan than the ones not running)
TALLY_CLIP = 2.5  # a round counts as at most this many times its prediction (another process's stall)
TALLY_SHRINK_ROUNDS = 8  # a plan's own tally outweighs its mode's after this many rounds (four rounds, one stalled,
# would read a fifth slow)
FACTOR_RANGE = (0.25, 4.0)  # a tally's correction stays within this (a figure that far off is re-measured)
UNTRIED_CAP = 1.25  # an unmeasured plan is trusted at most this far above what its mode's plans delivered
HIT_DECAY = 0.97  # an ssd plan's hits against its predicted hits: about thirty rounds (a hit is luck)
HIT_PRIOR = 1.0  # ... starting from this many predicted hits seen
AGE_WEIGHT = 0.25  # a tally read back from disk counts as this share of its rounds (the machine may have changed)

# -- trees and the pool ------------------------------------------------------------------------------------
WINDOW_MARGIN = 0.85  # a tree must fit in this share of one target verify (without early stop)
EARLY_STOP_MARGIN = 1.3  # with early stop a deeper tree is cut short and served shallower: allow more
LOOKUP_DEPTHS = 4  # a pool token's acceptance is learnt by its chain place: 0, 1, 2, and 3 or later
LOOKUP_GAIN = 1.05  # a pool draft must promise this much more than the step it replaces
RATIO_WEIGHT = 2.0  # a pool acceptance's prior counts as this many observations
RATIO_DECAY = 0.97  # ... and its observations fade over about thirty chains
