# Superset configuration for bench/superset/dashboard.sh (SUPERSET_CONFIG_PATH).
# The metadata database is SQLite in the run's temporary directory.
import os

_work = os.environ["DPNOISE_SUPERSET_WORK"]

SQLALCHEMY_DATABASE_URI = f"sqlite:///{_work}/superset.db?check_same_thread=false"
SECRET_KEY = "dpnoise-superset-dashboard-demo-" + os.path.basename(_work)
# Superset's own result cache off: every chart load reaches PostgreSQL, so
# what a reload costs is what dpnoise charges, not what Superset remembers.
DATA_CACHE_CONFIG = {"CACHE_TYPE": "NullCache"}
CACHE_CONFIG = {"CACHE_TYPE": "NullCache"}
FILTER_STATE_CACHE_CONFIG = {"CACHE_TYPE": "SimpleCache", "CACHE_DEFAULT_TIMEOUT": 3600}
EXPLORE_FORM_DATA_CACHE_CONFIG = {"CACHE_TYPE": "SimpleCache", "CACHE_DEFAULT_TIMEOUT": 3600}
TALISMAN_ENABLED = False
RATELIMIT_ENABLED = False
AUTH_RATE_LIMITED = False
WTF_CSRF_ENABLED = True
WTF_CSRF_TIME_LIMIT = None
FEATURE_FLAGS = {"DASHBOARD_NATIVE_FILTERS": True}
