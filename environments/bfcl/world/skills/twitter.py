"""Twitter's actions (TwitterAPI): post, comment, follow, retweet, a file tweeted, and a
comment on the conversation's own tweet."""

from __future__ import annotations

from typing import Any

from environments.bfcl.world.generator import TOPICS, VERBS, WORDS
from environments.bfcl.world.skills.files import file_text
from environments.bfcl.world.skills.logins import log_in
from environments.bfcl.world.skills.session import Act, Session, gerund, led, quoted
from rods_env.domain import SkillUnavailable


def tw_post(s: Session, items: int) -> Act:
    tw = s.live("TwitterAPI")
    text = f"{gerund(s.rng.choice(VERBS)).capitalize()} {s.rng.choice(TOPICS)} today!"
    tags = sorted(s.rng.sample(["#work", "#life", "#plans", "#team", "#notes"], 2))
    mentions = sorted({t["username"] for t in tw.tweets.values()} - {tw.username})[:1]
    lead = log_in(s, "TwitterAPI")
    s.call("post_tweet", content=text, tags=tags, mentions=mentions)
    extra = f" and mention {mentions[0]}" if mentions else ""
    body = s.pick((
        f"post '{text}' with the tags {tags[0]} and {tags[1]}{extra}.",
        f"tweet '{text}', tagged {tags[0]} and {tags[1]}{extra}.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"tweet": text})


def _tweet_by_word(s: Session) -> tuple[str, dict[str, Any]]:
    tw = s.live("TwitterAPI")
    words: dict[str, list[int]] = {}
    for tid, t in tw.tweets.items():
        for w in set(str(t["content"]).lower().replace("!", "").split()):
            if len(w) > 5:
                words.setdefault(w, []).append(tid)
    unique = sorted(w for w, ids in words.items() if len(ids) == 1)
    if not unique:
        raise SkillUnavailable("no tweet has a word of its own")
    word = s.rng.choice(unique)
    return word, tw.tweets[words[word][0]]


def tw_comment(s: Session, items: int) -> Act:
    word, tweet = _tweet_by_word(s)
    text = s.pick(("Great news, congrats!", "Count me in.", "Love this, well done!"))
    lead = log_in(s, "TwitterAPI")
    s.call("search_tweets", keyword=word)
    s.call("comment", tweet_id=tweet["id"], comment_content=text)
    body = s.pick((
        f"find the tweet that mentions '{word}' and comment '{text}' on it.",
        f"reply to the tweet about '{word}' with the comment '{text}'.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"keyword": word, "comment": text})


def tw_follow(s: Session, items: int) -> Act:
    tw = s.live("TwitterAPI")
    options = sorted(
        {f"{w}_{n}" for w in WORDS[:12] for n in ("news", "daily")} - set(tw.following_list)
    )
    handles = sorted(s.rng.sample(options, items))
    lead = log_in(s, "TwitterAPI")
    for h in handles:
        s.call("follow_user", username_to_follow=h)
    body = s.pick((f"follow {quoted(handles)} on Twitter.", f"start following {quoted(handles)}."))
    return Act(led(lead, body), facts={"account": handles[0]})


def tw_retweet(s: Session, items: int) -> Act:
    word, tweet = _tweet_by_word(s)
    lead = log_in(s, "TwitterAPI")
    s.call("search_tweets", keyword=word)
    s.call("retweet", tweet_id=tweet["id"])
    body = s.pick(
        (f"retweet the tweet about '{word}'.", f"share the '{word}' tweet with a retweet.")
    )
    return Act(led(lead, body), facts={"keyword": word})


def tw_share_file(s: Session, items: int) -> Act:
    folder, file, content = file_text(s)
    if len(content) > 200:
        raise SkillUnavailable("too long for a tweet")
    lead = log_in(s, "TwitterAPI")
    s.call("post_tweet", content=content)
    body = s.pick((
        f"post the content of {file} from {folder} as a tweet.",
        f"tweet exactly what {file} in {folder} says.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"folder": folder, "file": file})


def tw_comment_new(s: Session, items: int) -> Act:
    """Follow-up: comment on the tweet the conversation posted."""
    tweet_id = s.the_new("TwitterAPI", "tweets", "tweet")
    text = s.pick(("More soon.", "Thanks for the support!", "Details to follow."))
    lead = log_in(s, "TwitterAPI")
    s.call("comment", tweet_id=int(tweet_id), comment_content=text)
    body = s.pick((
        f"add the comment '{text}' under the tweet I just posted.",
        f"comment '{text}' on my new tweet.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"comment": text})
