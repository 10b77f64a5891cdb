import Gamebase
