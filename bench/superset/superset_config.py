SQLALCHEMY_DATABASE_URI = "sqlite:////tmp/superset-flow/superset.db?check_same_thread=false"
SECRET_KEY = "superset-flow-test-secret-key-0123456789abcdef"
WTF_CSRF_ENABLED = False
TALISMAN_ENABLED = False
# no result caching in Superset, so every chart fetch reaches PostgreSQL
DATA_CACHE_CONFIG = {"CACHE_TYPE": "NullCache"}
CACHE_CONFIG = {"CACHE_TYPE": "NullCache"}
FILTER_STATE_CACHE_CONFIG = {"CACHE_TYPE": "SimpleCache"}
EXPLORE_FORM_DATA_CACHE_CONFIG = {"CACHE_TYPE": "SimpleCache"}
RATELIMIT_ENABLED = False
AUTH_RATE_LIMITED = False
FEATURE_FLAGS = {}
